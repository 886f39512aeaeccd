package io.nccl4j.nccl;

/**
 * A program that leaves one communicator open and closes another, then returns from main: run as a
 * child JVM by {@link LiveCommunicatorsTest}, which reads the NCCL calls it prints.
 */
public final class UnclosedCommunicatorMain {
  private UnclosedCommunicatorMain() {}

  public static void main(String[] args) {
    CallLog log = new CallLog(true);
    FakeNccl fake = new FakeNccl(log);
    Nccl nccl = Nccl.of(fake, new FakeCuda(log).autoComplete(true), null);
    Communicator open = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId());
    Communicator closed = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId());
    closed.close();
    System.out.println("main returns with " + open + " open");
    System.out.flush();
  }
}

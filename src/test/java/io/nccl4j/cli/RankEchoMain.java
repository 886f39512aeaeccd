package io.nccl4j.cli;

/** A main class for {@code run --class}: prints its rank and arguments, exits 1 outside a launcher. */
public final class RankEchoMain {
  private RankEchoMain() {}

  public static void main(String[] args) {
    String rank = System.getenv("RANK");
    System.out.println("rank " + rank + " args " + args.length);
    System.exit(rank == null ? 1 : 0);
  }
}

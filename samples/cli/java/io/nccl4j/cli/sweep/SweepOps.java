package io.nccl4j.cli.sweep;

import java.util.List;
import java.util.stream.Collectors;

/**
 * The collectives {@code ./nccl4j sweep} knows, in the order {@code --op} lists them; a new one joins
 * here. The descriptors are empty records: stateless, equal by type, and named in what prints them.
 */
public final class SweepOps {
  public static final SweepOp ALLREDUCE = new SweepAllReduce();
  static final SweepOp REDUCESCATTER = new SweepReduceScatter();
  static final SweepOp ALLGATHER = new SweepAllGather();
  static final SweepOp BROADCAST = new SweepBroadcast();
  static final SweepOp REDUCE = new SweepReduce();
  static final SweepOp ALLTOALL = new SweepAllToAll();
  public static final SweepOp SENDRECV = new SweepSendRecv();
  static final SweepOp GATHER = new SweepGather();
  static final SweepOp SCATTER = new SweepScatter();
  static final SweepOp ALLGATHERV = new SweepAllGatherV();
  static final SweepOp REDUCESCATTERV = new SweepReduceScatterV();

  private static final List<SweepOp> ALL = List.of(ALLREDUCE, REDUCESCATTER, ALLGATHER, BROADCAST, REDUCE, ALLTOALL,
      SENDRECV, GATHER, SCATTER, ALLGATHERV, REDUCESCATTERV);

  private SweepOps() {}

  public static List<SweepOp> values() {
    return ALL;
  }

  /** "allreduce, reducescatter, …", for messages. */
  static String names() {
    return ALL.stream().map(SweepOp::name).collect(Collectors.joining(", "));
  }
}

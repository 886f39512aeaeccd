package io.nccl4j.internal.bind.nccl;

import org.bytedeco.cuda.cudart.CUevent_st;
import org.bytedeco.cuda.cudart.CUgraphExec_st;
import org.bytedeco.cuda.cudart.CUgraph_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.nccl.ncclComm;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.Pointer;

/**
 * Reusable JavaCPP handles, one set per thread. JavaCPP wraps every native pointer in a Java
 * object; creating one per call allocates, and one with a deallocator takes a global lock. These
 * subclasses only let nccl4j set the address of an existing object, so the hot path allocates
 * nothing.
 */
final class Refs {
  static final class Addr extends Pointer {
    Addr set(long a) {
      address = a;
      position = 0;
      limit = 0;
      capacity = 0;
      return this;
    }
  }

  static final class Stream extends CUstream_st {
    Stream set(long a) {
      address = a;
      return this;
    }
  }

  static final class Event extends CUevent_st {
    Event set(long a) {
      address = a;
      return this;
    }
  }

  static final class Graph extends CUgraph_st {
    Graph set(long a) {
      address = a;
      return this;
    }
  }

  static final class GraphExec extends CUgraphExec_st {
    GraphExec set(long a) {
      address = a;
      return this;
    }
  }

  static final class Comm extends ncclComm {
    Comm set(long a) {
      address = a;
      return this;
    }
  }

  final Addr a = new Addr();
  final Addr b = new Addr();
  final Stream stream = new Stream();
  final Event event = new Event();
  final Event event2 = new Event();
  final Comm comm = new Comm();
  final Graph graph = new Graph();
  final GraphExec graphExec = new GraphExec();
  /** Native int and float out-parameters, allocated once per thread. */
  final IntPointer int1 = new IntPointer(1);
  final FloatPointer float1 = new FloatPointer(1);

  private static final ThreadLocal<Refs> CURRENT = ThreadLocal.withInitial(Refs::new);

  static Refs get() {
    return CURRENT.get();
  }
}

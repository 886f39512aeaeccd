package io.nccl4j;

import java.util.Objects;

/**
 * Where a tensor's memory lives: host memory ({@code cpu}) or the memory of one CUDA device
 * ({@code cuda:N}). Immutable value; equal devices compare equal.
 */
public final class Device {
  /** The kind of memory. */
  public enum Type {
    /** Host memory ({@code cpu}); its {@link Device#index()} is -1. */
    CPU,
    /** The memory of one CUDA device ({@code cuda:N}), N its {@link Device#index()}. */
    CUDA
  }

  private static final Device CPU = new Device(Type.CPU, -1);

  private final Type type;
  private final int index;

  private Device(Type type, int index) {
    this.type = type;
    this.index = index;
  }

  /** Host memory. */
  public static Device cpu() {
    return CPU;
  }

  /**
   * CUDA device {@code index}.
   *
   * @throws IllegalArgumentException if {@code index} is negative
   */
  public static Device cuda(int index) {
    if (index < 0) {
      throw new IllegalArgumentException("CUDA device index must be >= 0, got " + index);
    }
    return new Device(Type.CUDA, index);
  }

  /**
   * Parses {@code cpu}, {@code cuda} (device 0) or {@code cuda:N}, as torch.device does.
   *
   * @throws IllegalArgumentException for anything else, naming the text
   */
  public static Device parse(String text) {
    Objects.requireNonNull(text, "device text");
    String t = text.trim();
    if (t.equals("cpu")) {
      return CPU;
    }
    if (t.equals("cuda")) {
      return cuda(0);
    }
    if (t.startsWith("cuda:")) {
      try {
        return cuda(Integer.parseInt(t.substring(5)));
      } catch (NumberFormatException e) {
        // fall through to the error below
      }
    }
    throw new IllegalArgumentException(
        "Expected a device string 'cpu', 'cuda' or 'cuda:N', got '" + text + "'");
  }

  /** Host or CUDA device memory. */
  public Type type() {
    return type;
  }

  /** Device ordinal for CUDA; -1 for the host. */
  public int index() {
    return index;
  }

  /** True for host memory ({@code cpu}). */
  public boolean isCpu() {
    return type == Type.CPU;
  }

  /** True for any CUDA device ({@code cuda:N}). */
  public boolean isCuda() {
    return type == Type.CUDA;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Device && ((Device) o).type == type && ((Device) o).index == index;
  }

  @Override
  public int hashCode() {
    return type.hashCode() * 31 + index;
  }

  @Override
  public String toString() {
    return type == Type.CPU ? "cpu" : "cuda:" + index;
  }
}

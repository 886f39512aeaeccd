package io.nccl4j.spark;

import io.nccl4j.Validation;
import io.nccl4j.nccl.Nccl;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * How {@link SparkProcessGroups#init} makes a task's group: the group's timeout, cross-rank validation, the
 * Spark resource that names the task's GPU, and (NCCL) which NCCL to load. Immutable; each {@code with…} returns a
 * copy. Every task of the stage must pass the same options.
 */
public final class SparkGroupOptions {
  /** PyTorch's default for a process group's collectives (gloo's): 30 minutes. */
  public static final Duration DEFAULT_TIMEOUT = Duration.ofMinutes(30);
  /** The resource Spark's GPU scheduling names ({@code spark.task.resource.gpu.amount}). */
  public static final String DEFAULT_GPU_RESOURCE = "gpu";

  private final Duration timeout;
  private final Validation validation;
  private final String gpuResource;
  private final Supplier<Nccl> nccl;

  private SparkGroupOptions(Duration timeout, Validation validation, String gpuResource, Supplier<Nccl> nccl) {
    this.timeout = timeout;
    this.validation = validation;
    this.gpuResource = gpuResource;
    this.nccl = nccl;
  }

  /**
   * The defaults: a 30-minute timeout, the validation {@code NCCL4J_VALIDATION} (or {@code TORCH_DISTRIBUTED_DEBUG})
   * of the executor's environment, the resource {@code gpu}, and the NCCL of the executor ({@link Nccl#load()}).
   *
   * @return the defaults
   */
  public static SparkGroupOptions defaults() {
    return new SparkGroupOptions(DEFAULT_TIMEOUT, null, DEFAULT_GPU_RESOURCE, null);
  }

  /**
   * Every wait of the group: the rendezvous through the store, and each collective.
   *
   * @param timeout positive
   * @return a copy with it
   */
  public SparkGroupOptions withTimeout(Duration timeout) {
    Objects.requireNonNull(timeout, "timeout");
    if (timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("timeout must be positive, got " + timeout);
    }
    return new SparkGroupOptions(timeout, validation, gpuResource, nccl);
  }

  /**
   * Cross-rank validation of the group's collectives.
   *
   * @param validation the mode
   * @return a copy with it
   */
  public SparkGroupOptions withValidation(Validation validation) {
    return new SparkGroupOptions(timeout, Objects.requireNonNull(validation, "validation"), gpuResource, nccl);
  }

  /**
   * The Spark resource whose address is the task's GPU (a cluster whose discovery script names GPUs otherwise).
   *
   * @param name the resource's name, as in {@code spark.task.resource.<name>.amount}
   * @return a copy with it
   */
  public SparkGroupOptions withGpuResource(String name) {
    Objects.requireNonNull(name, "name");
    if (name.isBlank()) {
      throw new IllegalArgumentException("the GPU resource's name must not be blank");
    }
    return new SparkGroupOptions(timeout, validation, name, nccl);
  }

  /**
   * The NCCL the task's group uses (NCCL backend): another native layer, or a test double that injects faults
   * ({@link Nccl#of}). Called once per group, in the task.
   *
   * @param nccl gives the NCCL
   * @return a copy with it
   */
  public SparkGroupOptions withNccl(Supplier<Nccl> nccl) {
    return new SparkGroupOptions(timeout, validation, gpuResource, Objects.requireNonNull(nccl, "nccl"));
  }

  /** @return the group's timeout */
  public Duration timeout() {
    return timeout;
  }

  /** @return the validation mode, the environment's when none was given */
  public Validation validation() {
    return validation != null ? validation : Validation.fromEnvironment();
  }

  /** @return the name of the resource that holds the task's GPU */
  public String gpuResource() {
    return gpuResource;
  }

  /** @return the NCCL to use: the given one, else the executor's */
  Nccl nccl() {
    return nccl != null ? nccl.get() : Nccl.load();
  }
}

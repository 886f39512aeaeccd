/**
 * The CPU backend's native kernels, sockets and futexes through JavaCPP: generated from the preset
 * {@link io.nccl4j.internal.bind.cpu.CpuKernels} over the headers in {@code native/jni/cpu}, compiled into the jar for the
 * platforms it ships for. Primitives in, primitives out (no JavaCPP type leaves this package), so that the backend
 * falls back to Java where the library does not load.
 *
 * <p>Internal: applications never use it directly, and the published javadoc leaves it out.
 */
package io.nccl4j.internal.bind.cpu;

/**
 * What happened, and where: NVTX ranges ({@link io.nccl4j.trace.Range}), observers of every
 * operation a group enqueues ({@link io.nccl4j.trace.CollectiveObserver}), the flight recorder of
 * recent operations and its analysis across ranks ({@link io.nccl4j.trace.FlightRecorder},
 * {@link io.nccl4j.trace.TraceAnalysis}), API-call counts per range and Chrome traces.
 */
package io.nccl4j.trace;

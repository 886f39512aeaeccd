/**
 * Ranks as processes: {@link io.nccl4j.launch.ProcessGroups} makes this process's group from the
 * environment a launcher sets ({@link io.nccl4j.launch.DistEnv}: nccl4j's launcher, torchrun,
 * Open MPI, Slurm), and {@link io.nccl4j.launch.Launcher} starts a job's processes
 * ({@code ./nccl4j run}). It sits beside {@link io.nccl4j.LocalCluster}, which runs ranks as
 * threads, and is the one package besides the NCCL backend itself that may load NCCL classes.
 */
package io.nccl4j.launch;

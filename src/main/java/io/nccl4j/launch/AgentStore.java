package io.nccl4j.launch;

import java.util.Map;
import java.util.Optional;

/**
 * torchrun's agent store: under torchrun (torchelastic) the agent hosts PyTorch's TCPStore on MASTER_PORT and
 * tells its workers so with {@code TORCHELASTIC_USE_AGENT_STORE=True}; every rank, rank 0 included, then joins it
 * as a client instead of hosting one. A restart of the workers (a rank failed and the agent started them again)
 * must give a clean group: PyTorch 1.x puts each attempt under {@code /worker/attempt_<TORCHELASTIC_RESTART_COUNT>}
 * in the agent's store, PyTorch 2.x starts a new store per attempt; nccl4j uses the prefix in both, which is fresh
 * in either and is PyTorch 1.x's own, so that keys line up with PyTorch ranks of the same job.
 *
 * @param restartCount {@code TORCHELASTIC_RESTART_COUNT} (0 before any restart)
 * @param runId {@code TORCHELASTIC_RUN_ID}, or null
 */
public record AgentStore(int restartCount, String runId) {
  /** The variable torchrun sets to {@code True} when its agent hosts the store. */
  public static final String USE_AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE";

  /**
   * The agent store that {@code env} names, if it names one.
   *
   * @throws IllegalArgumentException when the restart count is not a non-negative integer
   */
  public static Optional<AgentStore> from(Map<String, String> env) {
    // PyTorch compares with str(True): only "True" means the agent's store.
    if (!"True".equals(env.get(USE_AGENT_STORE))) {
      return Optional.empty();
    }
    String count = env.getOrDefault("TORCHELASTIC_RESTART_COUNT", "0").trim();
    int n;
    try {
      n = Integer.parseInt(count);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("TORCHELASTIC_RESTART_COUNT must be an integer, got '" + count + "'");
    }
    if (n < 0) {
      throw new IllegalArgumentException("TORCHELASTIC_RESTART_COUNT must be >= 0, got " + n);
    }
    String run = env.get("TORCHELASTIC_RUN_ID");
    return Optional.of(new AgentStore(n, run == null || run.isBlank() ? null : run.trim()));
  }

  /** The namespace of this attempt in the agent's store: PyTorch's own. */
  public String prefix() {
    return "/worker/attempt_" + restartCount;
  }
}

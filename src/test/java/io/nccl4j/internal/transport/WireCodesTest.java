package io.nccl4j.internal.transport;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.OpType;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The numbers ranks exchange stay what they are whatever the enums' order: an operation's and a channel's wire codes
 * (TCP frames, shared-memory publications, NCCL's fingerprint digests) and the native reduction kernels' numbers,
 * read here from the C header they must agree with. A kind added or moved in an enum changes none of them; a
 * changed number fails here, where it is a decision, not a side effect.
 */
@Tag("unit")
class WireCodesTest {
  @Test
  void operationsKeepTheirWireCodes() {
    Map<OpType, Integer> pinned = new LinkedHashMap<>();
    pinned.put(OpType.ALLREDUCE, 0);
    pinned.put(OpType.REDUCE_SCATTER, 1);
    pinned.put(OpType.ALLGATHER, 2);
    pinned.put(OpType.BROADCAST, 3);
    pinned.put(OpType.REDUCE, 4);
    pinned.put(OpType.ALLTOALL, 5);
    pinned.put(OpType.SEND, 6);
    pinned.put(OpType.RECV, 7);
    pinned.put(OpType.BARRIER, 8);
    pinned.put(OpType.COALESCED, 9);
    pinned.put(OpType.GATHER, 10);
    pinned.put(OpType.SCATTER, 11);
    assertThat(pinned.keySet()).as("every operation is pinned").containsExactlyInAnyOrder(OpType.values());
    pinned.forEach((op, code) -> {
      assertThat(op.wireCode()).as("%s", op).isEqualTo(code);
      assertThat(OpType.fromWireCode(code)).isEqualTo(op);
    });
    assertThat(OpType.fromWireCode(12)).isNull();
    assertThat(OpType.fromWireCode(-1)).isNull();
  }

  @Test
  void channelsKeepTheirWireCodes() {
    assertThat(TransferTag.Channel.COLLECTIVE.wireCode()).isZero();
    assertThat(TransferTag.Channel.P2P.wireCode()).isEqualTo(1);
    assertThat(TransferTag.Channel.values()).hasSize(2);
    assertThat(TransferTag.Channel.fromWireCode(2)).isNull();
  }

  /** The C header's enum, in its order: NCCL4J_F32_SUM is 0, and so on. */
  @Test
  void theKernelsNumbersAreTheHeaders() throws Exception {
    String header = Files.readString(Path.of("native/jni/cpu/nccl4j_cpu_kernels.h"), StandardCharsets.UTF_8);
    Matcher block = Pattern.compile("enum \\{([^}]*)NCCL4J_OP_COUNT").matcher(header);
    assertThat(block.find()).as("the kernels' enum in the header").isTrue();
    List<String> names = new ArrayList<>();
    Matcher name = Pattern.compile("NCCL4J_([A-Z0-9_]+)").matcher(block.group(1));
    while (name.find()) {
      names.add(name.group(1));
    }
    assertThat(names).hasSize(io.nccl4j.cpu.ReductionCodes.count());
    for (int code = 0; code < names.size(); code++) {
      assertThat(io.nccl4j.cpu.ReductionCodes.kernelCode(names.get(code))).as(names.get(code)).isEqualTo(code);
    }
  }
}

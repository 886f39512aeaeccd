package io.nccl4j.internal.transport.shm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.internal.transport.process.SharedMemorySwitch;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What the environment may say of shared memory ({@code NCCL4J_SHM}, {@code NCCL4J_SHM_BYTES}), what a rank
 * publishes of its {@code /dev/shm}'s room, and the lines that say a small one sends tensors over TCP.
 */
@Tag("unit")
class ShmSettingsTest {
  @TempDir
  Path dir;

  @Test
  void nccl4jShmTakesOnlyWordsThatSayOnOrOff() {
    for (String on : new String[] {null, "", " ", "1", "on", "ON", "true", "yes", " Yes "}) {
      assertThat(SharedMemorySwitch.enabled(on)).as("'%s'", on).isTrue();
    }
    for (String off : new String[] {"0", "off", "OFF", "false", "no", " no "}) {
      assertThat(SharedMemorySwitch.enabled(off)).as("'%s'", off).isFalse();
    }
    for (String neither : new String[] {"disabled", "2", "nope", "o"}) {
      assertThatThrownBy(() -> SharedMemorySwitch.enabled(neither)).isInstanceOf(IllegalArgumentException.class)
          .hasMessage("NCCL4J_SHM must be 1, on, true or yes (shared memory between the processes of a host, the"
              + " default) or 0, off, false or no (TCP only), got '" + neither + "'");
    }
  }

  @Test
  void nccl4jShmBytesIsRefusedOutsideWhatASegmentCanBe() {
    assertThat(HostSharedMemory.size(null)).isEqualTo(1L << 30);
    assertThat(HostSharedMemory.size(" ")).isEqualTo(1L << 30);
    assertThat(HostSharedMemory.size("67108864")).isEqualTo(67108864L);
    assertThat(HostSharedMemory.size(Long.toString(HostSharedMemory.MIN_BYTES))).isEqualTo(HostSharedMemory.MIN_BYTES);
    assertThat(HostSharedMemory.size(Long.toString(ShmSegment.MAX_BYTES))).isEqualTo(ShmSegment.MAX_BYTES);
    String range = "NCCL4J_SHM_BYTES must be between " + HostSharedMemory.MIN_BYTES + " and " + ShmSegment.MAX_BYTES
        + " bytes (a rank's shared-memory segment is one mapping), got ";
    for (long bad : new long[] {0, -5, HostSharedMemory.MIN_BYTES - 1, ShmSegment.MAX_BYTES + 1, 8L << 30}) {
      assertThatThrownBy(() -> HostSharedMemory.size(Long.toString(bad))).isInstanceOf(IllegalArgumentException.class)
          .hasMessage(range + bad);
    }
    assertThatThrownBy(() -> HostSharedMemory.size("64M")).hasMessage("NCCL4J_SHM_BYTES must be a number of bytes,"
        + " got '64M'");
  }

  /** What {@code nccl4j info} says of processes, from this machine's /dev/shm and the test's environment. */
  @Test
  void theReportSaysWhereProcessesOfAHostMeetAndHowMuchRoomThereIs() {
    assertThat(HostSharedMemory.describe()).matches("processes of one host: shared memory in /dev/shm \\((\\d+ MiB"
        + " free|unknown room), \\d+ MiB segments(: tensors that do not fit go over TCP)?\\), TCP across hosts"
        + "|processes: TCP only \\((NCCL4J_SHM|/dev/shm does not exist)\\)");
  }

  @Test
  void anEntryCarriesItsFileSystemsRoomAndSaysWhenTheSegmentIsLarger() throws Exception {
    ShmSegment s = ShmSegment.create(dir.resolve("nccl4j-room-3"), HostSharedMemory.MIN_BYTES);
    try {
      ShmEntry roomy = ShmEntry.parse(3, new String(ShmEntry.of("h", s, 3, 0, 5L << 30).bytesToPublish(),
          java.nio.charset.StandardCharsets.UTF_8));
      assertThat(roomy.room()).isEqualTo(5L << 30);
      assertThat(roomy.bytes()).isEqualTo(HostSharedMemory.MIN_BYTES);
      assertThat(roomy.roomShort()).isFalse();
      ShmEntry cramped = ShmEntry.parse(3, new String(ShmEntry.of("h", s, 3, 0, 1 << 20).bytesToPublish(),
          java.nio.charset.StandardCharsets.UTF_8));
      assertThat(cramped.room()).isEqualTo(1 << 20);
      assertThat(cramped.roomShort()).isTrue();
      assertThat(ShmEntry.of("h", s, 3, 0, -1).roomShort()).as("unknown room").isFalse();
      assertThat(ShmEntry.none("h", "why").roomShort()).isFalse();
      // Five fields are an older entry's: not one this version writes, so no segment and TCP.
      assertThat(ShmEntry.parse(3, "h\n" + s.path + "\n" + s.size + "\n3\n0").none())
          .isEqualTo("rank 3 published a shared-memory entry that is not one nccl4j writes");
    } finally {
      s.unlink();
    }
  }

  @Test
  void rankZerosLineNamesTheHostsWhoseShmHadLessRoomThanASegment() throws Exception {
    ShmSegment s = ShmSegment.create(dir.resolve("nccl4j-line-0"), HostSharedMemory.MIN_BYTES);
    try {
      long seg = s.size;
      ShmEntry roomy = ShmEntry.of("alpha/boot/mnt:[1]/net:[2]", s, 0, 0, 4 * seg);
      ShmEntry cramped = ShmEntry.of("beta/boot/mnt:[3]/net:[4]", s, 0, 0, 3L << 20);
      ShmEntry crampedMore = ShmEntry.of("beta/boot/mnt:[3]/net:[4]", s, 0, 0, 1L << 20);
      ShmEntry unknown = ShmEntry.of("alpha/boot/mnt:[1]/net:[2]", s, 0, 0, -1);

      assertThat(ShmAgreement.roomShortage(List.of(roomy, unknown), new int[][] {{0, 1}})).isNull();
      String suffix = ": tensors that do not fit are allocated outside it, and collectives on them go over TCP; give"
          + " it more room (a container's --shm-size) or set NCCL4J_SHM_BYTES to what fits";
      String mib = String.format(java.util.Locale.ROOT, "%.1f MiB", seg / 1048576.0);
      assertThat(ShmAgreement.roomShortage(List.of(cramped, crampedMore), new int[][] {{0, 1}}))
          .isEqualTo("shared memory between the group's processes is on, but " + dir + " had 1.0 MiB free for 2"
              + " segments of " + mib + suffix);
      assertThat(ShmAgreement.roomShortage(List.of(roomy, unknown, cramped, crampedMore), new int[][] {{0, 1}, {2, 3}}))
          .isEqualTo("shared memory between the group's processes is on, but on host beta, " + dir + " had 1.0 MiB"
              + " free for 2 segments of " + mib + suffix);
    } finally {
      s.unlink();
    }
  }

  @Test
  void aRanksLineForItsFirstTensorOutsideSaysWhy() throws Exception {
    ShmSegment s = ShmSegment.create(dir.resolve("nccl4j-out-2"), HostSharedMemory.MIN_BYTES);
    try {
      assertThat(ShmArena.outside(2, 4096, s, true)).isEqualTo("rank 2: a tensor of 4096 bytes is allocated outside"
          + " shared memory, so collectives on it go over TCP: the rank's segment nccl4j-out-2 (" + s.size
          + " bytes, NCCL4J_SHM_BYTES) is full; said for this rank's first such tensor only");
      assertThat(ShmArena.outside(2, 4096, s, false)).isEqualTo("rank 2: a tensor of 4096 bytes is allocated outside"
          + " shared memory, so collectives on it go over TCP: " + dir + " has no room left for it (a container's"
          + " --shm-size gives it more); said for this rank's first such tensor only");
    } finally {
      s.unlink();
    }
  }
}

package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.internal.bind.nccl.NativeRuntime;
import io.nccl4j.store.PrefixStore;
import io.nccl4j.store.Store;
import io.nccl4j.store.TcpStore;
import io.nccl4j.store.TcpStoreServer;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The real NCCL unique id (from libnccl.so.2, no GPU needed) travels from rank 0 to rank 1 through
 * a real TCP store, as in a multi-process job. Skipped, with the reason printed, where the native
 * libraries cannot be loaded.
 */
@Tag("native")
class UniqueIdOverTcpStoreTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);
  private static Nccl nccl;

  @BeforeAll
  static void load() {
    NativeRuntime rt = NativeRuntime.get();
    if (!rt.isLoaded()) {
      System.out.println("UniqueIdOverTcpStoreTest skipped: " + rt.failure());
    }
    Assumptions.assumeTrue(rt.isLoaded(), rt::failure);
    nccl = Nccl.load();
  }

  @Test
  void uniqueIdTravelsFromRankZeroToRankOneByteForByte() throws Exception {
    try (TcpStoreServer server = TcpStoreServer.start(0);
         TcpStore client0 = TcpStore.connect("127.0.0.1", server.port(), TIMEOUT);
         TcpStore client1 = TcpStore.connect("127.0.0.1", server.port(), TIMEOUT)) {
      Store rank0 = new PrefixStore("pg1", client0);
      Store rank1 = new PrefixStore("pg1", client1);
      // Rank 1 starts first and waits for the id.
      CompletableFuture<byte[]> received =
          CompletableFuture.supplyAsync(() -> NcclRendezvous.exchangeUniqueId(nccl, rank1, 1, TIMEOUT));
      Thread.sleep(200);
      assertThat(received).as("rank 1 waits for rank 0").isNotDone();
      byte[] created = CompletableFuture.supplyAsync(() -> NcclRendezvous.exchangeUniqueId(nccl, rank0, 0, TIMEOUT))
          .get(30, TimeUnit.SECONDS);
      byte[] got = received.get(30, TimeUnit.SECONDS);
      assertThat(created).hasSize(128);
      assertThat(got).isEqualTo(created);
      assertThat(client1.get("pg1/" + NcclRendezvous.UNIQUE_ID_KEY, TIMEOUT)).isEqualTo(created);
      // A second group gets its own, different id.
      byte[] other = NcclRendezvous.exchangeUniqueId(nccl, new PrefixStore("pg2", client0), 0, TIMEOUT);
      assertThat(NcclRendezvous.exchangeUniqueId(nccl, new PrefixStore("pg2", client1), 1, TIMEOUT)).isEqualTo(other);
      assertThat(other).isNotEqualTo(created);
    }
  }

  @Test
  void aValueThatIsNotAUniqueIdIsRejected() {
    try (TcpStoreServer server = TcpStoreServer.start(0);
         TcpStore client = TcpStore.connect("127.0.0.1", server.port(), TIMEOUT)) {
      client.set(NcclRendezvous.UNIQUE_ID_KEY, new byte[] {1, 2, 3});
      Throwable e = catchThrowable(() -> NcclRendezvous.exchangeUniqueId(nccl, client, 1, TIMEOUT));
      assertThat(e).isInstanceOf(IllegalStateException.class)
          .hasMessage("The store holds a 3-byte value at nccl/uniqueId; an NCCL unique id has 128 bytes");
    }
  }
}

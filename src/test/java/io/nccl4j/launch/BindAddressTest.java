package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.store.JobIdentity;
import io.nccl4j.store.TcpStore;
import io.nccl4j.testing.TestTime;
import java.net.InetAddress;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Listeners bind only where the job needs them: before, every listener bound every interface. */
@Tag("unit")
class BindAddressTest {
  private static DistEnv master(String addr) {
    return new DistEnv(addr, 29500, 1, 2, 1, 2, "torchrun");
  }

  @Test
  void aJobOnTheLoopbackListensOnTheLoopbackOnly() {
    assertThat(BindAddress.choose(master("127.0.0.1"), Map.of()).isLoopbackAddress()).isTrue();
    assertThat(BindAddress.choose(master("localhost"), Map.of()).isLoopbackAddress()).isTrue();
    try (TcpStore host = TcpStore.hostAndConnect(BindAddress.choose(master("127.0.0.1"), Map.of()), 0,
        TestTime.seconds(30), JobIdentity.create())) {
      assertThat(host.server().address().isLoopbackAddress()).as("rank 0's store").isTrue();
    }
  }

  @Test
  void aNameThatOnlyResolvesToTheLoopbackHereListensOnEveryInterface() {
    // Not literally the loopback (as Debian's own host name on 127.0.1.1): other nodes may reach it elsewhere.
    assertThat(new DistEnv("0:0:0:0:0:0:0:1", 29500, 1, 2, 1, 2, "torchrun").masterIsLoopback()).isFalse();
    assertThat(BindAddress.choose(master("0:0:0:0:0:0:0:1"), Map.of())).isNull();
  }

  @Test
  void anExplicitAddressWins() throws Exception {
    assertThat(BindAddress.choose(master("127.0.0.1"), Map.of(BindAddress.ENV, "0.0.0.0")).isAnyLocalAddress())
        .isTrue();
    InetAddress local = InetAddress.getByName("127.0.0.2");
    assertThat(BindAddress.choose(master("10.0.0.1"), Map.of(BindAddress.ENV, "127.0.0.2"))).isEqualTo(local);
  }

  @Test
  void aRemoteMasterIsReachedFromTheInterfaceThatRoutesToIt() {
    // 192.0.2.1 (TEST-NET-1) is never a local address; if no interface routes there, the error says so.
    Throwable e = catchThrowable(() -> {
      InetAddress a = BindAddress.choose(master("192.0.2.1"), Map.of());
      assertThat(a.isAnyLocalAddress()).as("not every interface").isFalse();
      assertThat(a.isLoopbackAddress()).as("not the loopback").isFalse();
    });
    if (e != null) {
      assertThat(e).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("no interface of this machine routes to MASTER_ADDR 192.0.2.1");
    }
  }

  @Test
  void anUnresolvableAddressIsNamed() {
    assertThat(catchThrowable(() -> BindAddress.choose(master("no-such-host.invalid"), Map.of())))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("rank 1: MASTER_ADDR 'no-such-host.invalid' does not resolve (");
    assertThat(catchThrowable(() -> BindAddress.choose(master("127.0.0.1"), Map.of(BindAddress.ENV, "nope.invalid"))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("NCCL4J_BIND_ADDR must be an address");
  }
}

package io.nccl4j.conformance;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.Tier;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * What each tier of the conformance suites proves, counted without running a case: every runner's
 * factories are asked for their cases in each tier (the dynamic tests are listed, never executed),
 * and the tiers are compared case by case. The quick tier and CI leave out only cases at a million
 * elements, and the nightly tier holds every case the matrix defines — so moving work between tiers
 * never silently drops a fact. Prints the counts (docs/TESTING.md).
 */
@Tag("meta")
class ConformanceInventoryTest {
  private static final List<Class<? extends ConformanceSuite>> RUNNERS = List.of(CpuConformanceTest.class,
      CpuRingConformanceTest.class, TcpConformanceTest.class, ShmConformanceTest.class,
      HierarchicalConformanceTest.class, SubgroupConformanceTest.class, ShmSubgroupConformanceTest.class,
      TcpSubgroupConformanceTest.class);

  /** Every case's path ("runner › factory › world size › dtype › count, op") in {@code tier}. */
  static Set<String> cases(Class<? extends ConformanceSuite> runner, Tier tier) throws Exception {
    var ctor = runner.getDeclaredConstructor();
    ctor.setAccessible(true);
    ConformanceSuite suite = ctor.newInstance();
    suite.tier = tier;
    Set<String> out = new LinkedHashSet<>();
    for (Class<?> c = runner; c != Object.class; c = c.getSuperclass()) {
      for (Method m : c.getDeclaredMethods()) {
        if (m.isAnnotationPresent(TestFactory.class)) {
          m.setAccessible(true);
          @SuppressWarnings("unchecked")
          Stream<DynamicNode> nodes = (Stream<DynamicNode>) m.invoke(suite);
          nodes.forEach(n -> collect(runner.getSimpleName() + " › " + m.getName(), n, out));
        }
      }
    }
    return out;
  }

  private static void collect(String path, DynamicNode node, Set<String> out) {
    String here = path + " › " + node.getDisplayName();
    if (node instanceof DynamicContainer) {
      ((DynamicContainer) node).getChildren().forEach(child -> collect(here, child, out));
    } else if (node instanceof DynamicTest) {
      out.add(here);
    }
  }

  @Test
  void theQuickTierAndCiLeaveOutOnlyCasesOfAMillionElementsAndTheNightlyTierHoldsEveryCase() throws Exception {
    Map<String, int[]> counts = new LinkedHashMap<>();
    int[] total = new int[4];
    List<String> problems = new ArrayList<>();
    for (Class<? extends ConformanceSuite> runner : RUNNERS) {
      Set<String> quick = cases(runner, Tier.QUICK);
      Set<String> ci = cases(runner, Tier.CI);
      Set<String> nightly = cases(runner, Tier.NIGHTLY);
      long large = nightly.stream().filter(ConformanceInventoryTest::isLarge).count();
      if (!nightly.containsAll(ci) || !ci.containsAll(quick)) {
        problems.add(runner.getSimpleName() + ": a tier holds a case the tier above it lacks");
      }
      nightly.stream().filter(c -> !isLarge(c) && !quick.contains(c)).findFirst()
          .ifPresent(c -> problems.add("the quick tier leaves out a case below a million elements: " + c));
      if (ci.stream().noneMatch(ConformanceInventoryTest::isLarge)) {
        problems.add(runner.getSimpleName() + ": CI runs no case of a million elements");
      }
      int[] c = {quick.size(), ci.size(), nightly.size(), (int) large};
      counts.put(runner.getSimpleName(), c);
      for (int i = 0; i < 4; i++) {
        total[i] += c[i];
      }
    }
    counts.forEach((r, c) -> System.out.printf("conformance cases %-28s quick %5d  ci %5d  nightly %5d  (%d at a million"
        + " elements; %d of them in CI)%n", r, c[0], c[1], c[2], c[3], c[1] - c[0]));
    System.out.printf("conformance cases %-28s quick %5d  ci %5d  nightly %5d  (%d at a million elements; %d of them in"
        + " CI)%n", "all runners", total[0], total[1], total[2], total[3], total[1] - total[0]);
    assertThat(problems).isEmpty();
    assertThat(total[2] - total[0]).as("cases at a million elements (nightly minus quick)").isEqualTo(total[3]);
  }

  private static boolean isLarge(String path) {
    return path.contains("count " + ConformanceSuite.LARGE);
  }
}

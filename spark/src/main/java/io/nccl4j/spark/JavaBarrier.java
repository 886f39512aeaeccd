package io.nccl4j.spark;

import java.io.Serializable;
import java.util.Iterator;
import org.apache.spark.Partitioner;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import scala.Function1;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * Barrier execution mode from Java: Spark's Java API has no {@code barrier()}, so this runs
 * {@code rdd.rdd().barrier().mapPartitions(f)} for a {@link JavaRDD}. Every partition's task is launched at once
 * (gang-scheduled); a failed task fails the whole stage, which Spark retries only when it is a shuffle map stage
 * ({@link #mapPartitionsRetriable}). An application with dynamic allocation is refused here, at once
 * ({@link SparkGroupConf#checkNoDynamicAllocation}), not when its job is submitted.
 */
public final class JavaBarrier {
  private JavaBarrier() {}

  /**
   * Runs {@code f} on every partition of {@code rdd} in one barrier stage; inside it,
   * {@code BarrierTaskContext.get()} is the task's context (for {@link SparkProcessGroups#init}).
   *
   * @param rdd the data
   * @param f what each task does with its partition (serialized to the executors)
   * @param <T> the elements
   * @param <R> what each task returns
   * @return the tasks' results, lazily (an action runs the stage)
   * @throws IllegalArgumentException when the application runs with dynamic allocation, which barrier stages do not
   */
  public static <T, R> JavaRDD<R> mapPartitions(JavaRDD<T> rdd, FlatMapFunction<Iterator<T>, R> f) {
    SparkGroupConf.checkNoDynamicAllocation(rdd.context().getConf());
    @SuppressWarnings("unchecked")
    ClassTag<R> tag = (ClassTag<R>) ClassTag$.MODULE$.AnyRef();
    Function1<scala.collection.Iterator<T>, scala.collection.Iterator<R>> scalaF = new PartitionFunction<>(f);
    return new JavaRDD<>(rdd.rdd().barrier().mapPartitions(scalaF, false, tag), tag);
  }

  /**
   * {@link #mapPartitions}, ended by a shuffle so that Spark retries the stage when a task fails: a barrier stage
   * whose results go straight to an action is a result stage, which Spark does not retry ("Could not recover from a
   * failed barrier ResultStage"); one whose results feed a shuffle is a shuffle map stage, which Spark runs again as
   * a whole, up to {@code spark.stage.maxConsecutiveAttempts} (4) times — XGBoost4J-Spark's {@code repartition(1)}
   * after its training stage. Here the shuffle keeps each task's results in the partition of its own index, in
   * their order, so the RDD looks like {@link #mapPartitions}'s; the results are written to the executors' disks on
   * the way (the pattern suits a stage whose results are small: a model, statistics).
   *
   * @param rdd the data
   * @param f what each task does with its partition; every attempt of the stage runs it again
   * @param <T> the elements
   * @param <R> what each task returns (serializable: it crosses the shuffle)
   * @return the last attempt's results, by partition, lazily
   * @throws IllegalArgumentException when the application runs with dynamic allocation, which barrier stages do not
   */
  public static <T, R> JavaRDD<R> mapPartitionsRetriable(JavaRDD<T> rdd, FlatMapFunction<Iterator<T>, R> f) {
    JavaRDD<R> stage = mapPartitions(rdd, f);
    int partitions = stage.getNumPartitions();
    JavaPairRDD<Integer, R> keyed = JavaPairRDD.fromJavaRDD(stage.mapPartitionsWithIndex(
        (index, results) -> new Keyed<>(index, results), true));
    return keyed.partitionBy(new ByIndex(partitions)).values();
  }

  /** A task's results, each keyed by the task's partition. */
  private static final class Keyed<R> implements Iterator<Tuple2<Integer, R>> {
    private final Integer index;
    private final Iterator<R> results;

    Keyed(Integer index, Iterator<R> results) {
      this.index = index;
      this.results = results;
    }

    @Override
    public boolean hasNext() {
      return results.hasNext();
    }

    @Override
    public Tuple2<Integer, R> next() {
      return new Tuple2<>(index, results.next());
    }
  }

  /** Partition i's results into partition i. */
  private static final class ByIndex extends Partitioner {
    private static final long serialVersionUID = 1L;
    private final int partitions;

    ByIndex(int partitions) {
      this.partitions = partitions;
    }

    @Override
    public int numPartitions() {
      return partitions;
    }

    @Override
    public int getPartition(Object key) {
      return (Integer) key;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof ByIndex b && b.partitions == partitions;
    }

    @Override
    public int hashCode() {
      return partitions;
    }
  }

  @SuppressWarnings("unchecked")
  private static <E extends Exception> E rethrow(Exception e) throws E {
    throw (E) e;
  }

  /** {@code f} as the Scala function Spark's barrier RDD takes, serializable with it. */
  private static final class PartitionFunction<T, R>
      extends scala.runtime.AbstractFunction1<scala.collection.Iterator<T>, scala.collection.Iterator<R>>
      implements Serializable {
    private static final long serialVersionUID = 1L;
    private final FlatMapFunction<Iterator<T>, R> f;

    PartitionFunction(FlatMapFunction<Iterator<T>, R> f) {
      this.f = f;
    }

    @Override
    public scala.collection.Iterator<R> apply(scala.collection.Iterator<T> rows) {
      try {
        return CollectionConverters.asScala(f.call(CollectionConverters.asJava(rows)));
      } catch (Exception e) {
        // As Scala (and Spark's own Java API) would: the task fails with f's exception itself, checked or not.
        throw JavaBarrier.<RuntimeException>rethrow(e);
      }
    }
  }
}

package io.nccl4j.spark;

import java.io.Serializable;
import java.util.Iterator;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import scala.Function1;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * Barrier execution mode from Java: Spark's Java API has no {@code barrier()}, so this runs
 * {@code rdd.rdd().barrier().mapPartitions(f)} for a {@link JavaRDD}. Every partition's task is launched at once
 * (gang-scheduled); a failed task fails the whole stage, which Spark retries only when it is a shuffle map stage.
 * An application with dynamic allocation is refused here, at once ({@link SparkGroupConf#checkNoDynamicAllocation}),
 * not when its job is submitted.
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

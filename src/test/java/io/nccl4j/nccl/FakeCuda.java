package io.nccl4j.nccl;

import io.nccl4j.memory.NativeMemory;
import io.nccl4j.internal.bind.nccl.CudaApi;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A CUDA runtime without a GPU, for fault-injection tests. "Device memory" is host memory (malloc
 * through {@link NativeMemory}, filled with {@link #GARBAGE} so that uninitialised reads show);
 * copies are {@link NativeMemory#copy}; streams and events are counters named {@code s1, s2, …}
 * and {@code e1, e2, …} (the legacy default stream is {@code s0}). An event that was recorded is
 * not complete ({@link CudaApi#ERROR_NOT_READY}) until the test calls {@link #complete} or
 * {@link #completeAll}, unless {@link #autoComplete} is on, in which case it completes when recorded.
 * Streams and events that were destroyed (or never created) are invalid handles
 * (cudaErrorInvalidResourceHandle), as they are in CUDA.
 * Every call is appended to the {@link CallLog}. Any call can be made to fail once with
 * {@link #failNext}.
 *
 * <p>Frees are stream-ordered as in CUDA: a {@code cudaStreamWaitEvent} on a stream whose event is
 * not complete yet makes that stream wait, and a {@code cudaFreeAsync} on a waiting stream returns
 * the memory (and counts it free in {@link #liveBytes}) only once those events have completed.
 */
public final class FakeCuda implements CudaApi {
  static final long STREAM_BASE = 0x5_0000_0000L;
  static final long EVENT_BASE = 0xE_0000_0000L;
  /** Byte that fresh "device" memory is filled with. */
  public static final byte GARBAGE = (byte) 0xAB;
  private static final int INVALID_VALUE = 1;
  private static final int INVALID_DEVICE = 101;
  private static final int INVALID_RESOURCE_HANDLE = 400;

  private final CallLog log;
  private final AtomicLong streams = new AtomicLong();
  private final AtomicLong events = new AtomicLong();
  private final Map<Long, Event> eventState = new ConcurrentHashMap<>();
  private final Map<Long, Boolean> liveStreams = new ConcurrentHashMap<>();
  private final Map<Long, Long> allocations = new ConcurrentHashMap<>();
  private final AtomicLong liveBytes = new AtomicLong();
  private final Map<String, Deque<Integer>> script = new ConcurrentHashMap<>();
  private final Map<Long, Boolean> capturing = new ConcurrentHashMap<>();
  /** Streams that joined a capture through an event recorded on a capturing stream, and not back. */
  private final Map<Long, Long> joined = new ConcurrentHashMap<>();
  private final java.util.List<String> freeThreads = new java.util.concurrent.CopyOnWriteArrayList<>();
  private final ThreadLocal<int[]> captureMode = ThreadLocal.withInitial(() -> new int[] {STREAM_CAPTURE_MODE_GLOBAL});
  /** Per stream, the events it waits for that had not completed when it was told to wait. */
  private final Map<Long, java.util.Set<Long>> streamWaits = new ConcurrentHashMap<>();
  /** Frees queued behind a stream's waits: address → the events they wait for. */
  private final Map<Long, java.util.Set<Long>> pendingFrees = new ConcurrentHashMap<>();
  private volatile boolean memoryPools;
  private volatile boolean freeSynchronizes;
  private volatile boolean autoComplete;
  private volatile int deviceCount = 1;
  private volatile int deviceCountResult = SUCCESS;

  private static final class Event {
    volatile boolean recorded;
    volatile boolean complete;
    volatile long stream;
    /** Recorded on a capturing stream: a node of the graph, not a point in a running stream. */
    volatile boolean captured;
  }

  public FakeCuda(CallLog log) {
    this.log = log;
  }

  // ------------------------------------------------------------------ test controls

  /** On: events complete when recorded. Off (the default): they wait for {@link #complete}. */
  public FakeCuda autoComplete(boolean on) {
    autoComplete = on;
    if (on) {
      completeAll();
    }
    return this;
  }

  /** Completes one recorded event. */
  public void complete(long event) {
    Event e = eventState.get(event);
    if (e == null) {
      throw new IllegalArgumentException("no such event " + event(event));
    }
    e.complete = true;
    releasePendingFrees();
  }

  /** Completes every event recorded so far on {@code stream}: the work queued there has ended. */
  public void completeStream(long stream) {
    eventState.values().stream().filter(e -> e.recorded && e.stream == stream).forEach(e -> e.complete = true);
    releasePendingFrees();
  }

  /** Completes every event recorded so far. */
  public void completeAll() {
    eventState.values().forEach(e -> e.complete = true);
    releasePendingFrees();
  }

  /** True when event {@code h} has completed, or no longer exists (its recorded work is over or forgotten). */
  private boolean passed(long h) {
    Event e = eventState.get(h);
    return e == null || !e.recorded || e.complete;
  }

  /** Returns the memory of queued frees whose stream's waits have all passed. */
  private synchronized void releasePendingFrees() {
    for (var it = pendingFrees.entrySet().iterator(); it.hasNext();) {
      var f = it.next();
      if (f.getValue().stream().allMatch(this::passed)) {
        it.remove();
        Long bytes = allocations.remove(f.getKey());
        if (bytes != null) {
          liveBytes.addAndGet(-bytes);
          NativeMemory.free(f.getKey());
        }
      }
    }
  }

  /** The number of devices {@link #getDeviceCount} reports, and its result code. */
  public FakeCuda devices(int count, int result) {
    deviceCount = count;
    deviceCountResult = result;
    return this;
  }

  /** The next call of {@code function} (e.g. {@code "malloc"}) returns {@code code} and does nothing. */
  public void failNext(String function, int code) {
    script.computeIfAbsent(function, k -> new ArrayDeque<>()).add(code);
  }

  private Integer scripted(String function) {
    Deque<Integer> q = script.get(function);
    if (q == null) {
      return null;
    }
    synchronized (q) {
      return q.poll();
    }
  }

  /**
   * Whether the device reports cudaDevAttrMemoryPoolsSupported, as current GPUs do; off by default,
   * so that the tests of the enqueue template see plain cudaMalloc/cudaFree.
   */
  public FakeCuda memoryPools(boolean on) {
    memoryPools = on;
    return this;
  }

  /**
   * On: cudaFree synchronises the device, as it may in CUDA: it waits until every recorded event has
   * completed (at most 5 s, then it gives up and says so in its result).
   */
  public FakeCuda freeSynchronizes(boolean on) {
    freeSynchronizes = on;
    return this;
  }

  /** {@code free@thread} or {@code freeAsync@thread} for each cudaFree / cudaFreeAsync, in order. */
  public java.util.List<String> freeThreads() {
    return java.util.List.copyOf(freeThreads);
  }

  /** Bytes currently cudaMalloc'd and not freed. */
  public long liveBytes() {
    return liveBytes.get();
  }

  public int liveAllocations() {
    return allocations.size();
  }

  public int liveStreams() {
    return liveStreams.size();
  }

  public int liveEvents() {
    return eventState.size();
  }

  public boolean isComplete(long event) {
    Event e = eventState.get(event);
    return e != null && (!e.recorded || e.complete);
  }

  /** {@code s0} for the legacy default stream, {@code s3} for the third stream created. */
  public static String stream(long h) {
    return h == 0 ? "s0" : h > STREAM_BASE && h < STREAM_BASE + (1L << 32) ? "s" + (h - STREAM_BASE) : "s?" + hex(h);
  }

  public static String event(long h) {
    return h > EVENT_BASE && h < EVENT_BASE + (1L << 32) ? "e" + (h - EVENT_BASE) : "e?" + hex(h);
  }

  /** The handle of event {@code eN}. */
  public static long eventHandle(int n) {
    return EVENT_BASE + n;
  }

  public static long streamHandle(int n) {
    return n == 0 ? 0 : STREAM_BASE + n;
  }

  public static String hex(long address) {
    return "0x" + Long.toHexString(address);
  }

  /** The legacy default stream (0) and streams created and not destroyed are valid. */
  private boolean validStream(long h) {
    return h == 0 || liveStreams.containsKey(h);
  }

  private int logged(String entry, String function) {
    Integer rc = scripted(function);
    log.add(rc == null ? entry : entry + "=" + rc);
    return rc == null ? SUCCESS : rc;
  }

  // ------------------------------------------------------------------ CudaApi

  @Override
  public int getDeviceCount(int[] out) {
    int rc = logged("getDeviceCount()", "getDeviceCount");
    if (rc == SUCCESS) {
      rc = deviceCountResult;
    }
    out[0] = rc == SUCCESS ? deviceCount : 0;
    return rc;
  }

  @Override
  public int setDevice(int device) {
    int rc = logged("setDevice(" + device + ")", "setDevice");
    if (rc == SUCCESS && device >= deviceCount && deviceCountResult == SUCCESS) {
      return INVALID_DEVICE;
    }
    return rc;
  }

  @Override
  public int getDevice(int[] out) {
    out[0] = 0;
    return logged("getDevice()", "getDevice");
  }

  @Override
  public int driverGetVersion(int[] out) {
    out[0] = 12060;
    return logged("driverGetVersion()", "driverGetVersion");
  }

  @Override
  public int runtimeGetVersion(int[] out) {
    out[0] = 12060;
    return logged("runtimeGetVersion()", "runtimeGetVersion");
  }

  @Override
  public int getDeviceName(int device, String[] out) {
    out[0] = "Fake GPU " + device;
    return logged("getDeviceName(" + device + ")", "getDeviceName");
  }

  @Override
  public int memGetInfo(long[] out) {
    out[0] = (1L << 30) - liveBytes.get();
    out[1] = 1L << 30;
    return logged("memGetInfo()", "memGetInfo");
  }

  @Override
  public int malloc(long[] outPtr, long bytes) {
    Integer rc = scripted("malloc");
    if (rc != null) {
      log.add("malloc(" + bytes + ")=" + rc);
      outPtr[0] = 0;
      return rc;
    }
    long a = NativeMemory.allocate(bytes);
    NativeMemory.fill(a, bytes, GARBAGE);
    allocations.put(a, bytes);
    liveBytes.addAndGet(bytes);
    outPtr[0] = a;
    log.add("malloc(" + bytes + ")->" + hex(a));
    return SUCCESS;
  }

  @Override
  public int free(long ptr) {
    freeThreads.add("free@" + Thread.currentThread().getName());
    int rc = logged("free(" + hex(ptr) + ")", "free");
    if (rc != SUCCESS) {
      return rc;
    }
    if (freeSynchronizes) {
      long deadline = System.nanoTime() + 5_000_000_000L;
      while (eventState.values().stream().anyMatch(e -> e.recorded && !e.complete && !e.captured)) {
        if (System.nanoTime() > deadline) {
          return ERROR_NOT_READY;
        }
        Thread.onSpinWait();
      }
    }
    Long bytes = allocations.remove(ptr);
    if (bytes == null) {
      return INVALID_VALUE;
    }
    liveBytes.addAndGet(-bytes);
    NativeMemory.free(ptr);
    return SUCCESS;
  }

  @Override
  public int deviceGetAttribute(int[] out, int attr, int device) {
    out[0] = attr == DEV_ATTR_MEMORY_POOLS_SUPPORTED && memoryPools ? 1 : 0;
    return logged("deviceGetAttribute(" + attr + "," + device + ")", "deviceGetAttribute");
  }

  @Override
  public int mallocAsync(long[] outPtr, long bytes, long stream) {
    Integer rc = scripted("mallocAsync");
    if (rc != null) {
      log.add("mallocAsync(" + bytes + "," + stream(stream) + ")=" + rc);
      outPtr[0] = 0;
      return rc;
    }
    if (!validStream(stream)) {
      return INVALID_RESOURCE_HANDLE;
    }
    long a = NativeMemory.allocate(bytes);
    NativeMemory.fill(a, bytes, GARBAGE);
    allocations.put(a, bytes);
    liveBytes.addAndGet(bytes);
    outPtr[0] = a;
    log.add("mallocAsync(" + bytes + "," + stream(stream) + ")->" + hex(a));
    return SUCCESS;
  }

  @Override
  public int freeAsync(long ptr, long stream) {
    freeThreads.add("freeAsync@" + Thread.currentThread().getName());
    int rc = logged("freeAsync(" + hex(ptr) + "," + stream(stream) + ")", "freeAsync");
    if (rc != SUCCESS) {
      return rc;
    }
    if (!validStream(stream)) {
      return INVALID_RESOURCE_HANDLE;
    }
    if (!allocations.containsKey(ptr) || pendingFrees.containsKey(ptr)) {
      return INVALID_VALUE;
    }
    synchronized (this) {
      java.util.Set<Long> waits = streamWaits.get(stream);
      if (waits != null) {
        waits.removeIf(this::passed);
      }
      if (waits != null && !waits.isEmpty()) {
        // In stream order: the memory returns to the pool when the stream reaches this point.
        pendingFrees.put(ptr, java.util.Set.copyOf(waits));
        return SUCCESS;
      }
    }
    Long bytes = allocations.remove(ptr);
    liveBytes.addAndGet(-bytes);
    NativeMemory.free(ptr);
    return SUCCESS;
  }

  /** Frees queued behind events that have not completed (see the class comment). */
  public int pendingFrees() {
    return pendingFrees.size();
  }

  @Override
  public int memcpy(long dst, long src, long bytes) {
    int rc = logged("memcpy(" + hex(dst) + "," + hex(src) + "," + bytes + ")", "memcpy");
    if (rc == SUCCESS) {
      NativeMemory.copy(src, dst, bytes);
    }
    return rc;
  }

  @Override
  public int memcpyAsync(long dst, long src, long bytes, long stream) {
    int rc = logged("memcpyAsync(" + hex(dst) + "," + hex(src) + "," + bytes + "," + stream(stream) + ")",
        "memcpyAsync");
    if (rc == SUCCESS && !validStream(stream)) {
      return INVALID_RESOURCE_HANDLE;
    }
    if (rc == SUCCESS) {
      NativeMemory.copy(src, dst, bytes);
    }
    return rc;
  }

  @Override
  public int memsetAsync(long ptr, int value, long bytes, long stream) {
    int rc = logged("memsetAsync(" + hex(ptr) + "," + value + "," + bytes + "," + stream(stream) + ")", "memsetAsync");
    if (rc == SUCCESS && !validStream(stream)) {
      return INVALID_RESOURCE_HANDLE;
    }
    if (rc == SUCCESS) {
      NativeMemory.fill(ptr, bytes, (byte) value);
    }
    return rc;
  }

  @Override
  public int deviceSynchronize() {
    return logged("deviceSynchronize()", "deviceSynchronize");
  }

  @Override
  public int streamCreateWithFlags(long[] outStream, int flags) {
    Integer rc = scripted("streamCreateWithFlags");
    if (rc != null) {
      log.add("streamCreateWithFlags(" + flags + ")=" + rc);
      return rc;
    }
    long h = STREAM_BASE + streams.incrementAndGet();
    liveStreams.put(h, true);
    outStream[0] = h;
    log.add("streamCreateWithFlags(" + flags + ")->" + stream(h));
    return SUCCESS;
  }

  @Override
  public int streamDestroy(long stream) {
    int rc = logged("streamDestroy(" + stream(stream) + ")", "streamDestroy");
    if (rc == SUCCESS && liveStreams.remove(stream) == null) {
      return INVALID_RESOURCE_HANDLE;
    }
    return rc;
  }

  /**
   * As CUDA's: blocks the host until the stream has done everything queued on it, here the events
   * it was told to wait for ({@link #streamWaitEvent}) — forever if one never completes; only an
   * interrupt of the waiting thread (a test's hang guard) ends it, with cudaErrorNotReady.
   */
  @Override
  public int streamSynchronize(long stream) {
    int rc = logged("streamSynchronize(" + stream(stream) + ")", "streamSynchronize");
    if (rc != SUCCESS) {
      return rc;
    }
    if (!validStream(stream)) {
      return INVALID_RESOURCE_HANDLE;
    }
    java.util.Set<Long> waits = streamWaits.get(stream);
    while (waits != null && !waits.stream().allMatch(this::passed)) {
      try {
        Thread.sleep(1);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return ERROR_NOT_READY;
      }
    }
    return SUCCESS;
  }

  @Override
  public int streamQuery(long stream) {
    int rc = logged("streamQuery(" + stream(stream) + ")", "streamQuery");
    return rc == SUCCESS && !validStream(stream) ? INVALID_RESOURCE_HANDLE : rc;
  }

  @Override
  public int streamWaitEvent(long stream, long event) {
    int rc = logged("streamWaitEvent(" + stream(stream) + "," + event(event) + ")", "streamWaitEvent");
    if (rc == SUCCESS && (!validStream(stream) || !eventState.containsKey(event))) {
      return INVALID_RESOURCE_HANDLE;
    }
    Event e = eventState.get(event);
    if (rc == SUCCESS && e != null && e.recorded && !e.complete && !e.captured) {
      synchronized (this) {
        streamWaits.computeIfAbsent(stream, k -> java.util.concurrent.ConcurrentHashMap.newKeySet()).add(event);
      }
    }
    if (rc == SUCCESS && e != null && e.captured) {
      // Waiting on a captured event: a capturing stream joins back whatever stream recorded it; any
      // other stream joins the capture.
      if (capturing.containsKey(stream)) {
        joined.remove(e.stream);
      } else {
        joined.put(stream, e.stream);
      }
    }
    return rc;
  }

  @Override
  public int eventCreateWithFlags(long[] outEvent, int flags) {
    Integer rc = scripted("eventCreateWithFlags");
    if (rc != null) {
      log.add("eventCreateWithFlags(" + flags + ")=" + rc);
      return rc;
    }
    long h = EVENT_BASE + events.incrementAndGet();
    eventState.put(h, new Event());
    outEvent[0] = h;
    log.add("eventCreateWithFlags(" + flags + ")->" + event(h));
    return SUCCESS;
  }

  @Override
  public int eventDestroy(long event) {
    int rc = logged("eventDestroy(" + event(event) + ")", "eventDestroy");
    if (rc == SUCCESS && eventState.remove(event) == null) {
      return INVALID_RESOURCE_HANDLE;
    }
    return rc;
  }

  @Override
  public int eventRecord(long event, long stream) {
    int rc = logged("eventRecord(" + event(event) + "," + stream(stream) + ")", "eventRecord");
    if (rc != SUCCESS) {
      return rc;
    }
    Event e = eventState.get(event);
    if (e == null || !validStream(stream)) {
      return INVALID_RESOURCE_HANDLE;
    }
    e.stream = stream;
    e.captured = capturing.containsKey(stream) || joined.containsKey(stream);
    e.complete = autoComplete && !e.captured;
    e.recorded = true;
    return SUCCESS;
  }

  @Override
  public int eventQuery(long event) {
    int rc = logged("eventQuery(" + event(event) + ")", "eventQuery");
    if (rc != SUCCESS) {
      return rc;
    }
    Event e = eventState.get(event);
    if (e == null) {
      return INVALID_RESOURCE_HANDLE;
    }
    if (e.captured) {
      // As in CUDA: an event recorded in a capture cannot be queried.
      return ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return !e.recorded || e.complete ? SUCCESS : ERROR_NOT_READY;
  }

  @Override
  public int eventSynchronize(long event) {
    int rc = logged("eventSynchronize(" + event(event) + ")", "eventSynchronize");
    if (rc != SUCCESS) {
      return rc;
    }
    if (!eventState.containsKey(event)) {
      return INVALID_RESOURCE_HANDLE;
    }
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (!isComplete(event)) {
      if (System.nanoTime() > deadline) {
        return ERROR_NOT_READY;
      }
      try {
        Thread.sleep(1);
      } catch (InterruptedException ex) {
        Thread.currentThread().interrupt();
        return ERROR_NOT_READY;
      }
    }
    return SUCCESS;
  }

  @Override
  public int eventElapsedTime(float[] out, long start, long end) {
    out[0] = 1.5f;
    int rc = logged("eventElapsedTime(" + event(start) + "," + event(end) + ")", "eventElapsedTime");
    return rc == SUCCESS && !(eventState.containsKey(start) && eventState.containsKey(end)) ? INVALID_RESOURCE_HANDLE : rc;
  }

  @Override
  public String getErrorName(int error) {
    log.add("getErrorName(" + error + ")");
    switch (error) {
      case SUCCESS: return "cudaSuccess";
      case INVALID_VALUE: return "cudaErrorInvalidValue";
      case ERROR_MEMORY_ALLOCATION: return "cudaErrorMemoryAllocation";
      case ERROR_STUB_LIBRARY: return "cudaErrorStubLibrary";
      case ERROR_INSUFFICIENT_DRIVER: return "cudaErrorInsufficientDriver";
      case ERROR_NO_DEVICE: return "cudaErrorNoDevice";
      case INVALID_DEVICE: return "cudaErrorInvalidDevice";
      case INVALID_RESOURCE_HANDLE: return "cudaErrorInvalidResourceHandle";
      case ERROR_NOT_READY: return "cudaErrorNotReady";
      case ERROR_STREAM_CAPTURE_UNSUPPORTED: return "cudaErrorStreamCaptureUnsupported";
      case ERROR_STREAM_CAPTURE_UNJOINED: return "cudaErrorStreamCaptureUnjoined";
      default: return "cudaErrorUnknown";
    }
  }

  @Override
  public String getErrorString(int error) {
    log.add("getErrorString(" + error + ")");
    switch (error) {
      case SUCCESS: return "no error";
      case INVALID_VALUE: return "invalid argument";
      case ERROR_MEMORY_ALLOCATION: return "out of memory";
      case ERROR_STUB_LIBRARY: return "CUDA driver is a stub library";
      case ERROR_NO_DEVICE: return "no CUDA-capable device is detected";
      case INVALID_DEVICE: return "invalid device ordinal";
      case INVALID_RESOURCE_HANDLE: return "invalid resource handle";
      case ERROR_NOT_READY: return "device not ready";
      case ERROR_STREAM_CAPTURE_UNSUPPORTED: return "operation not permitted when stream is capturing";
      case ERROR_STREAM_CAPTURE_UNJOINED: return "capture was not joined";
      default: return "unknown error";
    }
  }

  @Override
  public int getLastError() {
    log.add("getLastError()");
    return SUCCESS;
  }

  @Override
  public int streamIsCapturing(long stream, int[] out) {
    out[0] = capturing.containsKey(stream) ? STREAM_CAPTURE_STATUS_ACTIVE : STREAM_CAPTURE_STATUS_NONE;
    int rc = logged("streamIsCapturing(" + stream(stream) + ")", "streamIsCapturing");
    return rc == SUCCESS && !validStream(stream) ? INVALID_RESOURCE_HANDLE : rc;
  }

  @Override
  public int threadExchangeStreamCaptureMode(int[] mode) {
    int[] mine = captureMode.get();
    int old = mine[0];
    mine[0] = mode[0];
    mode[0] = old;
    return logged("threadExchangeStreamCaptureMode(" + mine[0] + ")", "threadExchangeStreamCaptureMode");
  }

  /** The calling thread's capture mode (cudaStreamCaptureModeGlobal until exchanged). */
  public int captureModeOfThisThread() {
    return captureMode.get()[0];
  }

  @Override
  public int streamBeginCapture(long stream, int mode) {
    int rc = logged("streamBeginCapture(" + stream(stream) + "," + mode + ")", "streamBeginCapture");
    if (rc == SUCCESS) {
      capturing.put(stream, true);
    }
    return rc;
  }

  /** Fails with cudaErrorStreamCaptureUnjoined while a stream that joined the capture was not joined back. */
  @Override
  public int streamEndCapture(long stream, long[] outGraph) {
    int rc = logged("streamEndCapture(" + stream(stream) + ")", "streamEndCapture");
    if (rc != SUCCESS) {
      return rc;
    }
    capturing.remove(stream);
    boolean unjoined = joined.containsValue(stream);
    joined.values().removeIf(origin -> origin == stream);
    outGraph[0] = 0x6_0000_0001L;
    return unjoined ? ERROR_STREAM_CAPTURE_UNJOINED : SUCCESS;
  }

  @Override
  public int graphInstantiate(long[] outExec, long graph) {
    outExec[0] = 0x6_1000_0001L;
    return logged("graphInstantiate()", "graphInstantiate");
  }

  @Override
  public int graphLaunch(long exec, long stream) {
    return logged("graphLaunch(" + stream(stream) + ")", "graphLaunch");
  }

  @Override
  public int graphExecDestroy(long exec) {
    return logged("graphExecDestroy()", "graphExecDestroy");
  }

  @Override
  public int graphDestroy(long graph) {
    return logged("graphDestroy()", "graphDestroy");
  }
}

// pqindex's JVM read shim: a DataSource V2 table whose scans Spark's own Parquet
// reader runs, on the row groups pqindex's planner keeps. Compiled on first use by
// pqindex.spark.shim against the session's pyspark jars; uses Spark internals
// (ParquetScan, FilePartition, PartitionedFile), so it is pinned to the Spark
// version it was checked with (see shim.py).
//
// Planning stays in Python: a scan hands its pushed filters and required columns to
// the planner the driver's Python process registered (a Py4J callback) and gets back
// the tasks, each a list of (file, byte range) pieces chosen so that Parquet's
// row-group selection by midpoint picks exactly the kept row groups; or, for a plan
// the driver reads itself (small), the rows as an Arrow IPC stream file, which the
// scan turns into Spark rows (a LocalScan: no task reads a file).
package pqindex.spark.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.function.Function;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.spark.paths.SparkPath;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.SupportsReportStatistics;
import org.apache.spark.sql.connector.read.Statistics;
import org.apache.spark.sql.connector.read.VariantExtraction;
import org.apache.spark.sql.execution.datasources.FilePartition;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.execution.arrow.ArrowConverters$;
import org.apache.spark.sql.execution.datasources.v2.parquet.ParquetScan;
import org.apache.spark.sql.sources.*;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.util.ArrowUtils$;
import org.apache.spark.sql.util.CloseableIterator;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.Option;

public final class PqIndexShim {
  private static final ObjectMapper JSON = new ObjectMapper();
  // The driver's Python planner (one per JVM: pyspark has one driver process).
  private static volatile Function<String, String> planner;


  public PqIndexShim() {}

  public void setPlanner(Function<String, String> p) {
    planner = p;
  }

  public String sparkVersion() {
    return org.apache.spark.package$.MODULE$.SPARK_VERSION();
  }

  /** A DataFrame of the dataset ``id`` (the planner's key) with ``schemaJson``. */
  public Dataset<Row> frame(SparkSession session, String id, String name, String schemaJson,
      String dataSchemaJson) {
    StructType schema = (StructType) DataType.fromJson(schemaJson);
    StructType dataSchema = (StructType) DataType.fromJson(dataSchemaJson);
    ShimTable table = new ShimTable(session, id, name, schema, dataSchema);
    DataSourceV2Relation rel = DataSourceV2Relation.create(table, Option.empty(), Option.empty(),
        CaseInsensitiveStringMap.empty(), Option.empty());
    return Dataset.ofRows(session, rel);
  }

  static final class ShimTable implements SupportsRead {
    final SparkSession session;
    final String id;
    final String name;
    final StructType schema;
    final StructType dataSchema;

    ShimTable(SparkSession session, String id, String name, StructType schema,
        StructType dataSchema) {
      this.session = session;
      this.id = id;
      this.name = name;
      this.schema = schema;
      this.dataSchema = dataSchema;
    }

    @Override public String name() { return name; }

    @Override public StructType schema() { return schema; }

    @Override public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.BATCH_READ);
    }

    // A new builder per scan of a query: nothing of an earlier query is kept.
    @Override public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      return new ShimScanBuilder(this);
    }
  }

  static final class ShimScanBuilder implements SupportsPushDownFilters,
      SupportsPushDownRequiredColumns {
    final ShimTable table;
    Filter[] filters = new Filter[0];
    StructType required;

    ShimScanBuilder(ShimTable table) {
      this.table = table;
      this.required = table.schema;
    }

    // Every filter is also Spark's to apply after the scan: pqindex and Parquet only
    // prune (row groups, pages), they never filter rows.
    @Override public Filter[] pushFilters(Filter[] f) {
      filters = f;
      return f;
    }

    @Override public Filter[] pushedFilters() { return filters; }

    @Override public void pruneColumns(StructType r) { required = r; }

    // Planned here, not on first use of the scan: the answer decides the kind of scan
    // (rows read by the driver, or byte ranges), and an implied filter's column must be
    // in the scan's read schema (Parquet's column-index filtering treats a filter column
    // it does not read as missing: no row), which Spark reads now.
    @Override public Scan build() {
      JsonNode answer = ask(table, filters, required);
      if (answer.has("local")) {
        return new LocalShimScan(table, filters, required, answer);
      }
      if (answer.has("arrow")) {
        return new ArrowScan(table, filters, required, answer);
      }
      return new ShimScan(table, filters, required, answer);
    }
  }

  /** The planner's answer for a scan of ``table`` with ``filters`` and ``required``. */
  static JsonNode ask(ShimTable table, Filter[] filters, StructType required) {
    Function<String, String> p = planner;
    if (p == null) {
      throw new IllegalStateException("pqindex: no planner registered in this JVM");
    }
    ObjectNode req = JSON.createObjectNode();
    req.put("id", table.id);
    ArrayNode fs = req.putArray("filters");
    for (Filter f : filters) {
      ObjectNode j = filterJson(f);
      if (j != null) {
        fs.add(j);
      }
    }
    ArrayNode cols = req.putArray("columns");
    for (String c : required.fieldNames()) {
      cols.add(c);
    }
    req.put("schema", required.json());
    String answer = p.apply(req.toString());
    JsonNode root;
    try {
      root = JSON.readTree(answer);
    } catch (IOException e) {
      throw new IllegalStateException("pqindex planner answered no JSON: " + e, e);
    }
    if (root.has("error")) {
      throw new IllegalStateException("pqindex planner: " + root.get("error").asText());
    }
    return root;
  }

  /** Spark's statistics from the planner's estimate (``rows``, ``bytes``). */
  static Statistics stats(JsonNode answer) {
    java.util.OptionalLong rows = answer.has("rows")
        ? java.util.OptionalLong.of(answer.get("rows").asLong()) : java.util.OptionalLong.empty();
    java.util.OptionalLong bytes = answer.has("bytes")
        ? java.util.OptionalLong.of(answer.get("bytes").asLong()) : java.util.OptionalLong.empty();
    return new Statistics() {
      @Override public java.util.OptionalLong sizeInBytes() { return bytes; }
      @Override public java.util.OptionalLong numRows() { return rows; }
    };
  }

  /** A scan the driver's pqindex already read: its rows, from the Arrow IPC stream file
   * the planner wrote (deleted here). Spark's LocalTableScanExec serves them. */
  static final class LocalShimScan implements LocalScan, SupportsReportStatistics {
    final ShimTable table;
    final Filter[] filters;
    final StructType required;
    final InternalRow[] rows;
    final Statistics stats;

    LocalShimScan(ShimTable table, Filter[] filters, StructType required, JsonNode answer) {
      this.table = table;
      this.filters = filters;
      this.required = required;
      this.rows = readRows(answer.get("local").isNull() ? null : answer.get("local").asText(),
          required);
      this.stats = stats(answer);
    }

    @Override public InternalRow[] rows() { return rows; }

    @Override public StructType readSchema() { return required; }

    @Override public Statistics estimateStatistics() { return stats; }

    @Override public String description() {
      return "pqindex " + table.name + " (read by the driver: " + rows.length + " rows, filters: "
          + filters.length + ")";
    }
  }

  /** The rows of the Arrow IPC stream file ``path`` (null: none), as UnsafeRows of
   * ``schema``; the file is deleted. */
  static InternalRow[] readRows(String path, StructType schema) {
    if (path == null) {
      return new InternalRow[0];
    }
    byte[] bytes = takeFile(path);
    scala.Tuple2<CloseableIterator<InternalRow>, StructType> got =
        ArrowConverters$.MODULE$.fromIPCStream(bytes);
    CloseableIterator<InternalRow> it = got._1();
    try {
      if (!DataType.equalsStructurally(got._2(), schema, true)) {
        throw new IllegalStateException("pqindex: the driver's rows have the schema "
            + got._2().simpleString() + ", the scan wants " + schema.simpleString());
      }
      UnsafeProjection proj = UnsafeProjection.create(schema);
      List<InternalRow> out = new ArrayList<>();
      while (it.hasNext()) {
        out.add(proj.apply(it.next()).copy());  // the batch's vectors are reused
      }
      return out.toArray(new InternalRow[0]);
    } finally {
      try {
        it.close();
      } catch (Exception e) {
        // releasing Arrow's buffers: the rows are copies
      }
    }
  }

  /** The bytes of the file ``path``, which is deleted. */
  static byte[] takeFile(String path) {
    try {
      return Files.readAllBytes(Paths.get(path));
    } catch (IOException e) {
      throw new IllegalStateException("pqindex: the driver's rows are gone: " + e, e);
    } finally {
      try {
        Files.deleteIfExists(Paths.get(path));
      } catch (IOException e) {
        // a leftover temporary file; the rows were read or the error says why not
      }
    }
  }

  /** A scan the driver's pqindex already read, with more rows than a LocalScan serves
   * well (each row copied, then serialized into the tasks): per task one Arrow IPC
   * stream the planner wrote, which the task reads as Spark's columnar batches
   * (ArrowColumnVector, no copy). Its classes reach the executors in the shim's jar. */
  static final class ArrowScan implements Scan, Batch, SupportsReportStatistics {
    final ShimTable table;
    final Filter[] filters;
    final StructType required;
    final InputPartition[] parts;
    final Statistics stats;
    final long rows;

    ArrowScan(ShimTable table, Filter[] filters, StructType required, JsonNode answer) {
      this.table = table;
      this.filters = filters;
      this.required = required;
      List<InputPartition> out = new ArrayList<>();
      for (JsonNode f : answer.get("arrow")) {
        out.add(new ArrowPartition(takeFile(f.asText())));
      }
      this.parts = out.toArray(new InputPartition[0]);
      this.stats = stats(answer);
      this.rows = answer.get("rows").asLong();
    }

    @Override public StructType readSchema() { return required; }

    @Override public String description() {
      return "pqindex " + table.name + " (read by the driver: " + rows + " rows in "
          + parts.length + " Arrow stream(s), filters: " + filters.length + ")";
    }

    @Override public Statistics estimateStatistics() { return stats; }

    @Override public Batch toBatch() { return this; }

    @Override public InputPartition[] planInputPartitions() { return parts; }

    @Override public PartitionReaderFactory createReaderFactory() { return new ArrowReaders(); }
  }

  /** One Arrow IPC stream of rows the driver read. */
  public static final class ArrowPartition implements InputPartition {
    private static final long serialVersionUID = 1L;
    final byte[] ipc;

    ArrowPartition(byte[] ipc) { this.ipc = ipc; }
  }

  /** Reads an ArrowPartition as columnar batches (Spark adds the row conversion). */
  public static final class ArrowReaders implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    @Override public PartitionReader<InternalRow> createReader(InputPartition partition) {
      throw new IllegalStateException("pqindex: Arrow partitions are read as columns");
    }

    @Override public boolean supportColumnarReads(InputPartition partition) { return true; }

    @Override public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition p) {
      return new ArrowBatches(((ArrowPartition) p).ipc);
    }
  }

  static final class ArrowBatches implements PartitionReader<ColumnarBatch> {
    private final BufferAllocator alloc;
    private final ArrowStreamReader reader;
    private ColumnarBatch batch;

    ArrowBatches(byte[] ipc) {
      alloc = ArrowUtils$.MODULE$.rootAllocator().newChildAllocator("pqindex-rows", 0,
          Long.MAX_VALUE);
      reader = new ArrowStreamReader(new ByteArrayInputStream(ipc), alloc);
    }

    @Override public boolean next() throws IOException {
      if (!reader.loadNextBatch()) {
        return false;
      }
      VectorSchemaRoot root = reader.getVectorSchemaRoot();
      List<FieldVector> vs = root.getFieldVectors();
      ColumnVector[] cols = new ColumnVector[vs.size()];
      for (int i = 0; i < cols.length; i++) {
        cols[i] = new ArrowColumnVector(vs.get(i));
      }
      batch = new ColumnarBatch(cols, root.getRowCount());
      return true;
    }

    @Override public ColumnarBatch get() { return batch; }

    @Override public void close() throws IOException {
      reader.close();  // the root's vectors with it
      alloc.close();
    }
  }

  static final class ShimScan implements Scan, Batch, SupportsReportStatistics {
    final ShimTable table;
    final Filter[] filters;
    final StructType required;
    private final InputPartition[] planned;
    // A filter every kept row satisfies (the planner's "implied"), for Parquet's page
    // selection only; null when the planner gave none.
    private final Filter implied;
    private final String impliedColumn;
    private final Statistics stats;
    private PartitionReaderFactory factory;

    ShimScan(ShimTable table, Filter[] filters, StructType required, JsonNode answer) {
      this.table = table;
      this.filters = filters;
      this.required = required;
      this.implied = answer.has("implied") ? impliedFilter(answer.get("implied")) : null;
      this.impliedColumn = implied == null ? null
          : answer.get("implied").get("column").asText();
      this.planned = partitions(answer);
      this.stats = stats(answer);
    }

    // The required columns, plus the implied filter's column when not among them
    // (Spark projects it away above the scan).
    @Override public StructType readSchema() {
      if (impliedColumn == null || java.util.Arrays.asList(required.fieldNames())
          .contains(impliedColumn)) {
        return required;
      }
      return required.add(table.schema.apply(impliedColumn));
    }

    @Override public String description() {
      return "pqindex " + table.name + " (filters: " + filters.length + ")";
    }

    @Override public Statistics estimateStatistics() { return stats; }

    @Override public Batch toBatch() { return this; }

    @Override public InputPartition[] planInputPartitions() { return planned; }

    private static InputPartition[] partitions(JsonNode root) {
      List<InputPartition> out = new ArrayList<>();
      for (JsonNode task : root.get("tasks")) {
        List<PartitionedFile> files = new ArrayList<>();
        for (JsonNode piece : task) {
          files.add(new PartitionedFile(InternalRow.empty(),
              SparkPath.fromUrlString(piece.get(0).asText()), piece.get(1).asLong(),
              piece.get(2).asLong(), new String[0], piece.get(4).asLong(),
              piece.get(3).asLong(), PartitionedFile.apply$default$8()));
        }
        out.add(new FilePartition(out.size(), files.toArray(new PartitionedFile[0])));
      }
      return out.toArray(new InputPartition[0]);
    }

    // One per scan: Spark asks each copy of the scan's plan node for it, and making one
    // broadcasts the Hadoop configuration.
    @Override public synchronized PartitionReaderFactory createReaderFactory() {
      if (factory == null) {
        factory = makeReaderFactory();
      }
      return factory;
    }

    private PartitionReaderFactory makeReaderFactory() {
      if (planned.length == 0) {
        // Nothing to read (pqindex kept no row group): no task will ask for a reader,
        // so skip ParquetScan's broadcast of the Hadoop configuration.
        return new NoReader();
      }
      SparkSession s = table.session;
      Filter[] forParquet = filters;
      if (implied != null) {
        // Parquet's own pruning only: Spark applies its filters, not this one, after the
        // scan, and the vectorized reader returns every row of the pages it selects.
        forParquet = java.util.Arrays.copyOf(filters, filters.length + 1);
        forParquet[filters.length] = implied;
      }
      ParquetScan scan = new ParquetScan(s, s.sessionState().newHadoopConf(), null,
          table.dataSchema, readSchema(), new StructType(), forParquet,
          CaseInsensitiveStringMap.empty(), ParquetScan.$lessinit$greater$default$9(),
          ParquetScan.$lessinit$greater$default$10(),
          ParquetScan.$lessinit$greater$default$11(), new VariantExtraction[0]);
      return scan.createReaderFactory();
    }
  }

  /** The planner's implied filter ({"column", "type", "ranges": [[lo, hi], ...]}, raw
   * Parquet values) as an OR of closed ranges, with the literal type Spark's Parquet
   * filters take for the column's Parquet type. */
  static Filter impliedFilter(JsonNode j) {
    String col = j.get("column").asText();
    String type = j.get("type").asText();
    Filter out = null;
    for (JsonNode r : j.get("ranges")) {
      Filter f = new And(new GreaterThanOrEqual(col, impliedValue(type, r.get(0).asLong())),
          new LessThanOrEqual(col, impliedValue(type, r.get(1).asLong())));
      out = out == null ? f : new Or(out, f);
    }
    return out;
  }

  static Object impliedValue(String type, long v) {
    switch (type) {
      case "int": return Integer.valueOf(Math.toIntExact(v));
      case "long": return Long.valueOf(v);
      case "date": return java.time.LocalDate.ofEpochDay(v);
      case "micros": return java.time.Instant.EPOCH.plus(v, java.time.temporal.ChronoUnit.MICROS);
      case "millis": return java.time.Instant.ofEpochMilli(v);
      default: throw new IllegalStateException("pqindex: implied filter type " + type);
    }
  }

  /** The reader factory of a scan with no partition: never asked for a reader. */
  static final class NoReader implements PartitionReaderFactory {
    @Override public PartitionReader<InternalRow> createReader(InputPartition partition) {
      throw new IllegalStateException("pqindex: a scan planned with no partition was read");
    }
  }

  // ---------------------------------------------------------------- filters as JSON

  private static final Set<String> BINARY = Set.of("EqualTo", "EqualNullSafe", "GreaterThan",
      "GreaterThanOrEqual", "LessThan", "LessThanOrEqual", "StringStartsWith",
      "StringEndsWith", "StringContains", "In");

  /** ``f`` as the planner reads it; null when it cannot say (Spark still applies it). */
  static ObjectNode filterJson(Filter f) {
    boolean negated = false;
    while (f instanceof Not) {
      negated = !negated;
      f = ((Not) f).child();
    }
    String kind = f.getClass().getSimpleName();
    String attr;
    Object value = null;
    boolean hasValue = true;
    if (f instanceof EqualTo) { attr = ((EqualTo) f).attribute(); value = ((EqualTo) f).value(); }
    else if (f instanceof EqualNullSafe) {
      attr = ((EqualNullSafe) f).attribute(); value = ((EqualNullSafe) f).value(); }
    else if (f instanceof GreaterThan) {
      attr = ((GreaterThan) f).attribute(); value = ((GreaterThan) f).value(); }
    else if (f instanceof GreaterThanOrEqual) {
      attr = ((GreaterThanOrEqual) f).attribute(); value = ((GreaterThanOrEqual) f).value(); }
    else if (f instanceof LessThan) { attr = ((LessThan) f).attribute(); value = ((LessThan) f).value(); }
    else if (f instanceof LessThanOrEqual) {
      attr = ((LessThanOrEqual) f).attribute(); value = ((LessThanOrEqual) f).value(); }
    else if (f instanceof StringStartsWith) {
      attr = ((StringStartsWith) f).attribute(); value = ((StringStartsWith) f).value(); }
    else if (f instanceof StringEndsWith) {
      attr = ((StringEndsWith) f).attribute(); value = ((StringEndsWith) f).value(); }
    else if (f instanceof StringContains) {
      attr = ((StringContains) f).attribute(); value = ((StringContains) f).value(); }
    else if (f instanceof In) { attr = ((In) f).attribute(); value = ((In) f).values(); }
    else if (f instanceof IsNull) { attr = ((IsNull) f).attribute(); hasValue = false; }
    else if (f instanceof IsNotNull) { attr = ((IsNotNull) f).attribute(); hasValue = false; }
    else { return null; }  // And/Or and the rest: Spark's alone
    if (attr.indexOf('`') >= 0) {
      return null;  // a quoted name (a dot inside): pqindex cannot name it
    }
    ObjectNode j = JSON.createObjectNode();
    j.put("name", kind);
    j.put("isNegated", negated);
    ArrayNode path = j.putArray("columnPath");
    for (String part : attr.split("\\.", -1)) {
      path.add(part);
    }
    if (hasValue) {
      if (value instanceof Object[]) {
        ArrayNode vs = j.putArray("value");
        for (Object v : (Object[]) value) {
          ObjectNode t = literal(v);
          if (t == null) {
            return null;
          }
          vs.add(t);
        }
      } else {
        ObjectNode t = literal(value);
        if (t == null) {
          return null;
        }
        j.set("value", t);
      }
    }
    return j;
  }

  /** A literal as {"t": type, "v": text}; null for a type the planner does not take. */
  static ObjectNode literal(Object v) {
    ObjectNode t = JSON.createObjectNode();
    String type;
    String text;
    if (v == null) { type = "null"; text = ""; }
    else if (v instanceof Boolean) { type = "bool"; text = v.toString(); }
    else if (v instanceof Byte || v instanceof Short || v instanceof Integer || v instanceof Long) {
      type = "int"; text = v.toString(); }
    else if (v instanceof Float || v instanceof Double) {
      type = "float"; text = Double.toString(((Number) v).doubleValue()); }
    else if (v instanceof BigDecimal) { type = "decimal"; text = ((BigDecimal) v).toPlainString(); }
    else if (v instanceof String) { type = "str"; text = (String) v; }
    else if (v instanceof byte[]) {
      type = "bytes"; text = Base64.getEncoder().encodeToString((byte[]) v); }
    else if (v instanceof java.time.LocalDate) { type = "date"; text = v.toString(); }
    else if (v instanceof java.sql.Date) {
      type = "date"; text = ((java.sql.Date) v).toLocalDate().toString(); }
    else if (v instanceof java.time.Instant) {
      java.time.Instant i = (java.time.Instant) v;
      type = "instant"; text = (i.getEpochSecond() * 1_000_000L + i.getNano() / 1000) + ""; }
    else if (v instanceof java.sql.Timestamp) {
      java.time.Instant i = ((java.sql.Timestamp) v).toInstant();
      type = "instant"; text = (i.getEpochSecond() * 1_000_000L + i.getNano() / 1000) + ""; }
    else if (v instanceof java.time.LocalDateTime) { type = "local"; text = v.toString(); }
    else { return null; }
    t.put("t", type);
    t.put("v", text);
    return t;
  }

}

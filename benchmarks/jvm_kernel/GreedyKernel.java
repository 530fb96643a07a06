package dpspark.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;

import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.expressions.XXH64;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;

/**
 * Benchmark-only JVM copy of dp_spark's per-shard greedy kernel (issue 26):
 * the body of {@code dp_spark.stages.distinct._greedy_partition} for lean
 * rows (person long, item key long) and {@code kernels.greedy_match_rounds},
 * run in the executor JVM through {@code mapPartitions} instead of a Python
 * worker. Not part of the package; compiled at run time by
 * {@code benchmarks/jvm_kernel_speed.py}.
 *
 * <p>Same input (the rows of {@code sharded_edges}: every shard whole in one
 * partition), same shard pmod(hash(person), shards) and person order
 * (xxhash64(person), person) (Spark's own Murmur3 and XXH64, seed 42), same
 * item order (item key, signed), same deduplication, same greedy: so the
 * (item key, round) rows are the same multiset. NON-PRIVATE output, like the
 * Python kernel's: private only after the release's noise.
 */
public final class GreedyKernel {
    private GreedyKernel() {
    }

    public static final StructType ROUND_SCHEMA = new StructType()
            .add("item_key", DataTypes.LongType)
            .add("round", DataTypes.IntegerType);

    /** (item_key, round) for every item some shard's greedy matched, per shard. */
    public static Dataset<Row> rounds(Dataset<Row> lean, String personCol, String itemKeyCol,
                                      int maxBound, int shards) {
        final int p = lean.schema().fieldIndex(personCol);
        final int i = lean.schema().fieldIndex(itemKeyCol);
        final int bound = maxBound;
        final int nShards = shards;
        return lean.mapPartitions(
                (MapPartitionsFunction<Row, Row>) rows -> partition(rows, p, i, bound, nShards),
                Encoders.row(ROUND_SCHEMA));
    }

    static Iterator<Row> partition(Iterator<Row> rows, int pCol, int iCol, int maxBound, int shards) {
        long[] person = new long[1 << 16];
        long[] item = new long[1 << 16];
        int n = 0;
        while (rows.hasNext()) {
            Row r = rows.next();
            if (n == person.length) {
                person = Arrays.copyOf(person, 2 * n);
                item = Arrays.copyOf(item, 2 * n);
            }
            person[n] = r.getLong(pCol);
            item[n] = r.getLong(iCol);
            n++;
        }
        List<Row> out = new ArrayList<>();
        if (n == 0) {
            return out.iterator();
        }
        // Distinct persons (sorted by value: the Python kernel's person rank).
        long[] persons = unique(Arrays.copyOf(person, n));
        int nPersons = persons.length;
        int[] shardOf = new int[nPersons];
        long[] keyOf = new long[nPersons];
        for (int k = 0; k < nPersons; k++) {
            shardOf[k] = Math.floorMod(Murmur3_x86_32.hashLong(persons[k], 42), shards);
            keyOf[k] = XXH64.hashLong(persons[k], 42L);
        }
        // Visiting order: (shard, order key, person), like np.lexsort((rank, key, shard)).
        Integer[] visit = new Integer[nPersons];
        for (int k = 0; k < nPersons; k++) {
            visit[k] = k;
        }
        Arrays.sort(visit, (a, b) -> {
            if (shardOf[a] != shardOf[b]) {
                return Integer.compare(shardOf[a], shardOf[b]);
            }
            if (keyOf[a] != keyOf[b]) {
                return Long.compare(keyOf[a], keyOf[b]);
            }
            return Long.compare(persons[a], persons[b]);
        });
        int[] position = new int[nPersons];
        for (int k = 0; k < nPersons; k++) {
            position[visit[k]] = k;
        }
        // Distinct item keys in ascending (signed) order: each person's preference order.
        long[] items = unique(Arrays.copyOf(item, n));
        long nItems = items.length;
        long[] pairs = new long[n];
        for (int k = 0; k < n; k++) {
            int pc = Arrays.binarySearch(persons, person[k]);
            int ic = Arrays.binarySearch(items, item[k]);
            pairs[k] = position[pc] * nItems + ic;
        }
        person = null;
        item = null;
        Arrays.sort(pairs);
        int m = 0;
        for (int k = 0; k < n; k++) {
            if (k == 0 || pairs[k] != pairs[k - 1]) {
                pairs[m++] = pairs[k];
            }
        }
        // CSR adjacency in visiting order.
        int[] indptr = new int[nPersons + 1];
        int[] adj = new int[m];
        for (int k = 0; k < m; k++) {
            int pp = (int) (pairs[k] / nItems);
            adj[k] = (int) (pairs[k] - pp * nItems);
            indptr[pp + 1]++;
        }
        for (int k = 0; k < nPersons; k++) {
            indptr[k + 1] += indptr[k];
        }
        pairs = null;
        boolean[] used = new boolean[(int) nItems];
        int[] ptr = new int[nPersons];
        int[] active = new int[nPersons];
        int lo = 0;
        while (lo < nPersons) {
            int shard = shardOf[visit[lo]];
            int hi = lo + 1;
            while (hi < nPersons && shardOf[visit[hi]] == shard) {
                hi++;
            }
            greedyShard(lo, hi, indptr, adj, items, maxBound, used, ptr, active, out);
            lo = hi;
        }
        return out.iterator();
    }

    /** greedy_match_rounds on persons lo..hi-1 (visiting positions); emits (item key, round). */
    static void greedyShard(int lo, int hi, int[] indptr, int[] adj, long[] items, int maxBound,
                            boolean[] used, int[] ptr, int[] active, List<Row> out) {
        int nActive = 0;
        for (int q = lo; q < hi; q++) {
            ptr[q] = indptr[q];
            if (indptr[q] < indptr[q + 1]) {
                active[nActive++] = q;
            }
        }
        List<Integer> matched = new ArrayList<>();
        for (int round = 1; round <= maxBound && nActive > 0; round++) {
            int still = 0;
            for (int a = 0; a < nActive; a++) {
                int q = active[a];
                int s = ptr[q];
                int e = indptr[q + 1];
                while (s < e && used[adj[s]]) {
                    s++;
                }
                if (s < e) {
                    int x = adj[s];
                    used[x] = true;
                    matched.add(x);
                    out.add(RowFactory.create(items[x], round));
                    s++;
                    if (s < e) {
                        active[still++] = q;
                    }
                }
                ptr[q] = s;
            }
            nActive = still;
        }
        for (int x : matched) {  // a fresh `used` for the next shard, as the Python kernel allocates one per shard
            used[x] = false;
        }
    }

    private static long[] unique(long[] values) {
        Arrays.sort(values);
        int m = 0;
        for (int k = 0; k < values.length; k++) {
            if (k == 0 || values[k] != values[k - 1]) {
                values[m++] = values[k];
            }
        }
        return Arrays.copyOf(values, m);
    }
}

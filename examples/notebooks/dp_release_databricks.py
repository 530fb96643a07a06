# Databricks notebook source
# MAGIC %md
# MAGIC # Differentially private releases with dp_spark
# MAGIC
# MAGIC Runs on the active SparkSession: a Databricks or Jupyter notebook, Spark Connect, or a local
# MAGIC session that `dp_spark.get_session()` starts when there is none. It releases a distinct-item
# MAGIC count and the top-10 items of a `(person, item)` table, shows the report a person reads, and
# MAGIC writes the outputs. Only released (noisy) values leave the releases.
# MAGIC
# MAGIC Set the parameters in the next cell (`INPUT = None` uses built-in synthetic data).

# COMMAND ----------

# Parameters
INPUT = None                  # a Parquet/CSV/JSON path or "table:db.name"; None = built-in synthetic data
PERSON_COL, ITEM_COL = "person_id", "item"
ROWS = 50_000                 # rows of synthetic data when INPUT is None
EPSILON = 1.0                 # ε of each release (person-level)
DELTA = 1e-6                  # δ of the top-k release (no public domain: Unknown Domain Gumbel)
OUTPUT_DIR = "dp_release_out" # a new directory: existing outputs are never overwritten
SEED = None                   # tests and demos only: a seeded release is NOT private

# COMMAND ----------

import os

import dp_spark
from dp_spark.datasets import synthetic_events
from dp_spark.io import read_input

spark = dp_spark.get_session()  # the notebook's session when there is one
print(type(spark).__module__, spark.version)
if INPUT:
    events = read_input(spark, INPUT, columns=[PERSON_COL, ITEM_COL])  # CSV/JSON: strings, never inferred
else:
    events = synthetic_events(spark, rows=ROWS)
    PERSON_COL, ITEM_COL = "person_id", "item"

# COMMAND ----------

# MAGIC %md
# MAGIC ## How many distinct items? (Knop & Steinke 2023, person-level ε-DP)

# COMMAND ----------

count = dp_spark.distinct_count(events, person_col=PERSON_COL, item_col=ITEM_COL, epsilon=EPSILON, seed=SEED)
print(count.summary())

# COMMAND ----------

# MAGIC %md
# MAGIC ## Which ten items have the most people? (Unknown Domain Gumbel, (ε, δ)-DP)

# COMMAND ----------

top = dp_spark.top_k(events, k=10, epsilon=EPSILON, delta=DELTA, person_col=PERSON_COL, item_col=ITEM_COL, seed=SEED)
print(top.summary())

# COMMAND ----------

# MAGIC %md
# MAGIC ## The report a person reads

# COMMAND ----------

def show(release):
    """The release's HTML page, inline (Databricks' displayHTML, else IPython's display)."""
    page = release.to_html()
    try:
        displayHTML(page)  # noqa: F821 - defined in Databricks notebooks
    except NameError:
        from IPython.display import HTML, display

        display(HTML(page))


show(count)
show(top)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Write the outputs (atomically; an existing output directory is refused)

# COMMAND ----------

from dp_spark.html_report import write_html
from dp_spark.io import write_json_atomic

if os.path.exists(OUTPUT_DIR):
    raise FileExistsError(f"{OUTPUT_DIR} exists: choose a new OUTPUT_DIR (outputs are never overwritten)")
for name, release in (("distinct_count", count), ("top_k", top)):
    write_json_atomic(f"{OUTPUT_DIR}/{name}_report.json", release.to_dict())
    write_html(f"{OUTPUT_DIR}/{name}_report.html", release)
top.items.coalesce(1).write.mode("error").parquet(f"{OUTPUT_DIR}/top_k_items.parquet")
print(sorted(os.listdir(OUTPUT_DIR)))

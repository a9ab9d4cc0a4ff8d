"""The data pipeline on Spark: order and stock events through the ``client_balance`` source.

    python examples/spark_pipeline.py --bootstrap 127.0.0.1:9092 --out /tmp/pipeline
    python examples/spark_pipeline.py --bootstrap ... --out ... --stream --checkpoint /tmp/ck
    python examples/spark_pipeline.py --master spark://127.0.0.1:7077 --bootstrap ... --out ...

Reads ``orders`` (JSON ``{"product", "qty", "price", "ts"}``) and ``stock`` (deliveries,
``{"product", "qty", "ts"}``) with the client-balanced source (each Spark task one node of
``--source-count``, by default the cluster's default parallelism), and computes orders, units
and revenue per product per minute, and each product's stock level (delivered minus ordered).
Batch mode writes both tables as Parquet under ``--out`` and prints the products by revenue.
``--stream`` runs the per-minute aggregation as a Structured Streaming query into Parquet with
``--checkpoint``: a restart goes on where it stopped, and the group ``--group`` sees the
committed offsets (those of every batch but each run's last, which the next run commits:
docs/spark.md). ``--orders`` and ``--stock`` name the topics. ``--master`` is Spark's master
URL (``local[2]`` by default): on a cluster, ``--out`` and ``--checkpoint`` must be folders that
the driver and every executor see, and the executors run ``PYSPARK_PYTHON`` (this interpreter
unless set), which must have client-balance installed on every machine.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

EVENT_SCHEMA = "product STRING, qty INT, price DOUBLE, ts DOUBLE"


def session(app: str, master: str = "local[2]") -> Any:
    """A Spark session on ``master`` whose Python workers run this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind to this machine only
    from pyspark.sql import SparkSession  # noqa: PLC0415 - after PYSPARK_PYTHON is set

    from client_balance.spark import register  # noqa: PLC0415 - imports pyspark

    spark = (
        SparkSession.builder.master(master).appName(app)
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def events(spark: Any, args: argparse.Namespace, topic: str, *, stream: bool = False) -> Any:
    """One topic's events, parsed from the JSON values."""
    from pyspark.sql import functions as f  # noqa: PLC0415 - imports pyspark

    reader = spark.readStream if stream else spark.read
    reader = (
        reader.format("client_balance")
        .option("kafka.bootstrap.servers", args.bootstrap).option("topics", topic)
        .option("group.id", args.group).option("startingOffsets", args.starting)
    )  # fmt: skip
    if args.source_count is not None:  # else the cluster's default parallelism
        reader = reader.option("sourceCount", args.source_count)
    raw = reader.load()
    parsed = raw.select(
        f.from_json(f.col("value").cast("string"), EVENT_SCHEMA).alias("e"), "node_id"
    )
    return parsed.select(
        "e.product",
        "e.qty",
        f.coalesce("e.price", f.lit(0.0)).alias("price"),
        f.to_timestamp(f.col("e.ts")).alias("at"),
        "node_id",
    )


def per_minute(orders: Any) -> Any:
    """Orders, units and revenue per product per minute."""
    from pyspark.sql import functions as f  # noqa: PLC0415 - imports pyspark

    return orders.groupBy(f.window("at", "1 minute").alias("minute"), "product").agg(
        f.count("*").alias("orders"),
        f.sum("qty").alias("units"),
        f.round(f.sum(f.col("qty") * f.col("price")), 2).alias("revenue"),
    )


def run_batch(spark: Any, args: argparse.Namespace) -> list[Any]:
    """The batch pipeline; the products by revenue, with their stock level."""
    from pyspark.sql import functions as f  # noqa: PLC0415 - imports pyspark

    orders = events(spark, args, args.orders)
    stock = events(spark, args, args.stock)
    minutes = per_minute(orders)
    minutes.write.mode("overwrite").parquet(str(args.out / "orders_per_minute"))
    delivered = stock.groupBy("product").agg(f.sum("qty").alias("delivered"))
    ordered = orders.groupBy("product").agg(
        f.count("*").alias("orders"),
        f.sum("qty").alias("units"),
        f.round(f.sum(f.col("qty") * f.col("price")), 2).alias("revenue"),
    )
    levels = (
        ordered.join(delivered, "product", "full_outer")
        .na.fill(0)
        .withColumn("stock_level", f.col("delivered") - f.col("units"))
        .orderBy(f.col("revenue").desc(), "product")
    )
    levels.write.mode("overwrite").parquet(str(args.out / "stock_levels"))
    return list(levels.collect())


def run_stream(spark: Any, args: argparse.Namespace) -> None:
    """The per-minute aggregation as a streaming query, until everything available is read."""
    query = (
        per_minute(events(spark, args, args.orders, stream=True).withWatermark("at", "1 minute"))
        .writeStream.outputMode("append").format("parquet")
        .option("path", str(args.out / "orders_per_minute_stream"))
        .option("checkpointLocation", str(args.checkpoint))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()


def print_levels(rows: list[Any], limit: int = 10) -> None:
    """The products by revenue, as a table."""
    more = len(rows) - limit
    table = Table(caption=f"... {more} more products" if more > 0 else None)
    table.add_column("product")
    for name in ("orders", "units", "revenue", "delivered", "stock"):
        table.add_column(name, justify="right")
    for row in rows[:limit]:
        table.add_row(
            row.product, f"{row.orders:,}", f"{row.units:,}", f"{row.revenue:,.2f}",
            f"{row.delivered:,}", f"{row.stock_level:,}",
        )  # fmt: skip
    Console().print(table)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bootstrap", default=os.environ.get("CLIENT_BALANCE_BOOTSTRAP_SERVERS"))
    parser.add_argument("--out", type=Path, required=True, help="Parquet output folder")
    parser.add_argument("--group", default="pipeline", help="Kafka group of the source")
    parser.add_argument(
        "--master", default="local[2]", help="Spark master URL, e.g. spark://127.0.0.1:7077"
    )
    parser.add_argument("--orders", default="orders", help="topic of the order events")
    parser.add_argument("--stock", default="stock", help="topic of the stock deliveries")
    parser.add_argument(
        "--source-count", type=int, help="nodes = Spark tasks (default: the default parallelism)"
    )
    parser.add_argument(
        "--starting", default="earliest", help="startingOffsets: earliest, latest or committed"
    )
    parser.add_argument("--stream", action="store_true", help="run as a streaming query")
    parser.add_argument("--checkpoint", type=Path, help="checkpoint folder (with --stream)")
    args = parser.parse_args(argv)
    if not args.bootstrap:
        parser.error("give --bootstrap or set CLIENT_BALANCE_BOOTSTRAP_SERVERS")
    if args.stream and args.checkpoint is None:
        parser.error("--stream needs --checkpoint")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the pipeline once; 0 on success."""
    args = parse_args(argv)
    spark = session("client-balance-pipeline", args.master)
    try:
        if args.stream:
            run_stream(spark, args)
            print(f"streamed into {args.out / 'orders_per_minute_stream'}")
        else:
            print_levels(run_batch(spark, args))
            print(f"Parquet tables in {args.out}: orders_per_minute, stock_levels")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

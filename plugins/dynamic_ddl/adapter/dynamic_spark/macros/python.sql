{#
    How a Python model's result is written: dbt-spark's script, made safe for
    open-source Spark.

    Differences from dbt-spark's py_write_table: the format defaults to
    parquet (not delta), partition_by is honoured, the script accepts classic
    and Spark Connect DataFrames, and it only ever writes the relation it is
    given, which our materializations keep apart from the live table until
    the write has succeeded.
#}
{% macro dynamic_spark__create_table_as(temporary, relation, compiled_code, language='sql') -%}
    {%- if language == 'python' -%}
        {{ dynamic_spark_py_write_table(compiled_code, relation) }}
    {%- else -%}
        {{ spark__create_table_as(temporary, relation, compiled_code, language) }}
    {%- endif -%}
{%- endmacro %}


{% macro dynamic_spark_py_write_table(compiled_code, target_relation) -%}
{%- set file_format = config.get('file_format', 'parquet') -%}
{%- set partition_by = config.get('partition_by') -%}
{%- if partition_by is string -%}{%- set partition_by = [partition_by] -%}{%- endif -%}
# dynamic_spark: model code starts on the next line
{{ compiled_code }}


# --- Written by the dynamic_spark adapter: run the model, write its result. --- #
def _dbt_to_spark_dataframe(result):
    import pyspark.sql

    if isinstance(result, pyspark.sql.DataFrame):
        return result
    if hasattr(result, "to_spark"):  # pandas-on-Spark
        return result.to_spark()
    try:
        import pandas
    except ImportError:
        pandas = None
    if pandas is not None and isinstance(result, pandas.DataFrame):
        return spark.createDataFrame(result)
    raise TypeError(
        f"model() returned {type(result).__name__}; return a Spark, pandas-on-Spark or pandas DataFrame."
    )


dbt = dbtObj(spark.table)
df = _dbt_to_spark_dataframe(model(dbt, spark))
writer = df.write.mode("overwrite").format({{ file_format | tojson }})
{%- if partition_by %}
writer = writer.partitionBy(*{{ partition_by | list | tojson }})
{%- endif %}
writer.saveAsTable({{ target_relation.render() | tojson }})
{%- endmacro %}

{#
    The lock of a whole dbt run on its schema (dynamic_ddl/locks.py, RunLock),
    taken in on-run-start and released in on-run-end by the commands that
    write (run, build, seed, snapshot): a second run started meanwhile waits
    (saying who holds the lock), then fails naming the holder when
    `DYNAMIC_DDL_LOCK_WAIT_SECONDS` have passed. `dbt test`, `docs` and
    `compile` read only, and take no lock.

    Example (dbt_project.yml):
        on-run-start: ["{{ hold_run_lock() }}", ...]
        on-run-end: [..., "{{ release_run_lock() }}"]
#}
{% macro hold_run_lock() %}
    {%- if execute and flags.WHICH in ['run', 'build', 'seed', 'snapshot'] -%}
        {% call statement('create_schema_for_run_lock') %}create schema if not exists {{ target.schema }}{% endcall %}
        {%- set holder = adapter.hold_run_lock(target.schema) -%}
        {% do log('Run lock on ' ~ target.schema ~ ' held by ' ~ holder ~ '.') %}
    {%- endif -%}
{% endmacro %}


{% macro release_run_lock() %}
    {%- if execute -%}
        {% do adapter.release_run_lock(target.schema) %}
    {%- endif -%}
{% endmacro %}

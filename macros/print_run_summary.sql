{#
    Print the tables a run built and their row counts (on-run-end hook).
    Off unless `--vars '{print_summary: true}'` (make run sets it), so tests
    and ad-hoc runs do not pay for the counts.

    Example:
        on-run-end: ["{{ print_run_summary(results) }}"]

    Arguments:
        results: the run's results, as dbt passes them to on-run-end, required
#}
{% macro print_run_summary(results) %}
    {%- if execute and var('print_summary', false) -%}
        {%- set lines = [] -%}
        {%- for result in results
            if result.node.resource_type in ['model', 'seed'] and result.status == 'success' -%}
            {%- set relation = adapter.get_relation(
                database=result.node.database,
                schema=result.node.schema,
                identifier=result.node.alias
            ) -%}
            {%- if relation is not none -%}
                {%- set row_count = run_query('select count(*) from ' ~ relation).columns[0].values()[0] -%}
                {%- set label = (relation ~ ' ').ljust(56, '.') -%}
                {%- do lines.append('  ' ~ label ~ ' ' ~ '{:>12,}'.format(row_count) ~ ' rows') -%}
            {%- endif -%}
        {%- endfor -%}
        {%- do log('Tables built this run (' ~ (lines | length) ~ '):\n' ~ (lines | join('\n')), info=True) -%}
    {%- endif -%}
    select 1
{% endmacro %}

{#
    Print a compact summary of the run (on-run-end hook): tables, rows, data
    files and partitions per layer (snapshots are a layer of their own; many
    files or partitions for few rows are what compaction is for), the
    partition versions the upsert tables' version stores keep (what
    retention, keep_commits and keep_days, left; vacuum removes orphans), the
    columns raw ingestion discovered this run, the lines it
    quarantined, the values it kept outside their column (as text in
    `__text`, in `_overflow`, or quarantined by `discard_value`), the
    partitions compaction wrote (`compact_every`), and the rows whose event
    time it could not read. Off unless `--vars '{print_summary: true}'` (make run
    sets it), so tests and ad-hoc runs do not pay for the counts.

    "This run" means the batches that started after dbt did: batch ids
    begin with their UTC start time (dynamic_ddl.ingest.ledger.new_batch_id).

    Example:
        on-run-end: ["{{ print_run_summary(results) }}"]

    Arguments:
        results: the run's results, as dbt passes them to on-run-end, required
#}
{% macro print_run_summary(results) %}
    {%- if execute and var('print_summary', false) -%}
        {%- set layers = {} -%}
        {%- for result in results
            if result.node.resource_type in ['model', 'seed', 'snapshot'] and result.status == 'success' -%}
            {%- set relation = adapter.get_relation(
                database=result.node.database,
                schema=result.node.schema,
                identifier=result.node.alias
            ) -%}
            {%- if relation is not none and not relation.is_view -%}
                {%- set layout = adapter.table_layout(relation) -%}
                {%- if result.node.resource_type == 'snapshot' -%}
                    {%- set layer = 'snapshots' -%}
                {%- else -%}
                    {%- set layer = result.node.fqn[1] if result.node.fqn | length > 2 else 'seeds' -%}
                {%- endif -%}
                {%- do layers.setdefault(layer, []).append(layout) -%}
                {%- do log('  ' ~ relation ~ ': ' ~ layout) -%}
            {%- endif -%}
        {%- endfor -%}
        {%- set order = ['seeds', 'raw', 'landing', 'snapshots', 'production'] -%}
        {%- set lines = ['Run summary (schema ' ~ target.schema ~ '):'] -%}
        {%- for layer in order + (layers.keys() | reject('in', order) | sort) if layer in layers -%}
            {%- set tables = layers[layer] -%}
            {%- do lines.append(('  {:<11} {:>3} tables {:>12,} rows {:>8,} files {:>7,} partitions'
                ~ ' {:>7,} versions kept').format(
                layer, tables | length, tables | sum(attribute='rows'),
                tables | sum(attribute='files'), tables | sum(attribute='partitions'),
                tables | sum(attribute='versions'))) -%}
        {%- endfor -%}
        {%- do lines.extend(dynamic_ddl.ingestion_summary_lines(target.schema)) -%}
        {%- do log(lines | join('\n'), info=True) -%}
    {%- endif -%}
    select 1
{% endmacro %}


{#
    The summary's lines on raw ingestion this run: columns the schema
    registry first saw, lines sent to quarantine, and values kept outside
    their column, per table or topic.

    Arguments:
        schema: the schema holding raw_schema_registry and raw_quarantine, required
#}
{% macro ingestion_summary_lines(schema) %}
    {%- set since = run_started_at.strftime('%Y%m%dT%H%M%SZ') -%}
    {#- The on-run-start hook creates both tables, outside dbt's relation cache. #}
    {%- set registry = api.Relation.create(schema=schema, identifier='raw_schema_registry') -%}
    {%- set quarantine = api.Relation.create(schema=schema, identifier='raw_quarantine') -%}
    {%- set discovered = dynamic_ddl.summary_count_line(
        'columns discovered this run',
        'select table_name, count(*) from ' ~ registry
        ~ " where first_seen_batch >= '" ~ since ~ "' group by 1 order by 1"
    ) -%}
    {%- set quarantined = dynamic_ddl.summary_count_line(
        'lines quarantined this run',
        'select topic, count(*) from ' ~ quarantine
        ~ " where batch_id >= '" ~ since ~ "' group by 1 order by 1",
        ' in ' ~ quarantine
    ) -%}
    {%- set values = api.Relation.create(schema=schema, identifier='raw_quarantined_values') -%}
    {%- set quarantined_values = dynamic_ddl.summary_count_line(
        'values quarantined this run',
        'select topic, count(*) from ' ~ values
        ~ " where batch_id >= '" ~ since ~ "' group by 1 order by 1",
        ' in ' ~ values
    ) -%}
    {#- Per table the registry knows: values in `__text` companions and in `_overflow`. -#}
    {%- set as_text = [] -%}
    {%- set outside = [] -%}
    {%- set compacted = [] -%}
    {%- for name in run_query('select distinct table_name from ' ~ registry ~ ' order by 1').columns[0].values() -%}
        {%- set table = adapter.get_relation(database=none, schema=schema, identifier=name) -%}
        {%- if table is not none -%}
            {%- set texts = [] -%}
            {%- set columns = adapter.get_columns_in_relation(table) -%}
            {%- for column in columns if column.name.endswith('__text') -%}
                {%- do texts.append('count(' ~ adapter.quote(column.name) ~ ')') -%}
            {%- endfor -%}
            {#- A merged partition's slot ends with `~<UTC stamp of its compaction>`. -#}
            {%- if '_slot' in columns | map(attribute='name') | list -%}
                {%- do compacted.append('select ' ~ adapter.string_literal(name)
                    ~ ', count(distinct _event_date, _slot) from ' ~ table
                    ~ " where _slot like '%~%' and substring_index(_slot, '~', -1) >= '"
                    ~ run_started_at.strftime('%Y%m%dT%H%M%S') ~ "' having count(*) > 0") -%}
            {%- endif -%}
            {%- set this_run = " from " ~ table ~ " where _batch_id >= '" ~ since ~ "'" -%}
            {%- if texts -%}
                {%- do as_text.append('select ' ~ adapter.string_literal(name) ~ ', ' ~ texts | join(' + ')
                    ~ this_run ~ ' having ' ~ texts | join(' + ') ~ ' > 0') -%}
            {%- endif -%}
            {%- set overflowed = 'sum(case when _overflow is null then 0 else size(_overflow) end)' -%}
            {%- do outside.append('select ' ~ adapter.string_literal(name) ~ ', ' ~ overflowed
                ~ this_run ~ ' having ' ~ overflowed ~ ' > 0') -%}
        {%- endif -%}
    {%- endfor -%}
    {%- set unreadable = [] -%}
    {%- for topic, entry in var('raw_topics', {}).items() -%}
        {%- set column = run_query(
            'select column_name from ' ~ registry ~ " where table_name = 'raw_" ~ topic
            ~ "' and json_path = " ~ dynamic_ddl.pivot_literal(entry['event_time'])
        ).columns[0].values() -%}
        {%- set raw = adapter.get_relation(database=none, schema=schema, identifier='raw_' ~ topic) -%}
        {%- if column and raw is not none -%}
            {#- A timestamp column keeps what it cannot hold in its text companion. -#}
            {%- set text = column_or_null(raw, column[0] ~ '__text', 'string', 'raw_rows') -%}
            {%- do unreadable.append(
                "select '" ~ raw.identifier ~ "', count(*) from " ~ raw ~ ' as raw_rows'
                ~ " where _batch_id >= '" ~ since ~ "' and _event_date is null and ("
                ~ adapter.quote(column[0]) ~ ' is not null or ' ~ text ~ ' is not null)'
                ~ ' having count(*) > 0') -%}
        {%- endif -%}
    {%- endfor -%}
    {%- set lines = [discovered, quarantined, quarantined_values] -%}
    {%- for label, queries, where in [
        ('values kept as text this run', as_text, ' (in <column>__text: their column cannot hold them)'),
        ('values in _overflow this run', outside, ' (over the column cap, or rescued)'),
        ('partitions compacted this run', compacted, ' (each the batches of a day, merged)'),
    ] -%}
        {%- if queries -%}
            {%- do lines.append(dynamic_ddl.summary_count_line(label, queries | join(' union all '), where)) -%}
        {%- else -%}
            {%- do lines.append('  ' ~ label ~ ': 0') -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if unreadable -%}
        {%- do lines.append(dynamic_ddl.summary_count_line(
            'event times unreadable this run', unreadable | join(' union all '),
            ' (rows kept, no _event_date; see event_time_format, time_formats)')) -%}
    {%- endif -%}
    {{ return(lines) }}
{% endmacro %}


{#-- "  <label>: <total> (<name> <count>, ...)<where>" from a query of (name, count) rows. --#}
{% macro summary_count_line(label, query, where='') %}
    {%- set rows = run_query(query).rows -%}
    {%- set parts = [] -%}
    {%- for row in rows -%}{%- do parts.append(row[0] ~ ' ' ~ row[1]) -%}{%- endfor -%}
    {%- set detail = (' (' ~ parts | join(', ') ~ ')' ~ where) if parts else '' -%}
    {{ return('  ' ~ label ~ ': ' ~ (rows | map(attribute=1) | sum) ~ detail) }}
{% endmacro %}

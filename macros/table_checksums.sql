{#
    Print a row-level checksum of every table of a layer, as one line of
    JSON: {"<table>": {"rows": n, "checksum": "<sum of row hashes>", "columns":
    [<names hashed>]}}; a model whose table does not exist: {"rows": null,
    "checksum": "missing"}.
    Sums of row hashes do not depend on files or row order, so equal
    checksums mean the same rows, up to hash collisions and the rounding
    below (used to compare engines).

    Left out of the hash: the upsert commit columns (_commit_id, _commit_ts,
    _source_commit_id), which name when a commit ran, not what it holds.
    Doubles are rounded to 6 decimals first: engines that split a sum
    differently may differ in its last bits.

    Example:
        dbt run-operation table_checksums --args '{layer: landing, exclude: [_batch_id]}'
        dbt run-operation table_checksums --args '{layers: [landing, production]}'

    Arguments:
        layer: the models' folder under models/ (fqn[1]), default `production`
        exclude: more columns to leave out (e.g. `_batch_id`, new in every build)
        layers: several layers at once (one dbt start), printed as
            {"<layer>": {"<table>": ...}}
#}
{% macro table_checksums(layer='production', exclude=[], layers=none) %}
    {#- Found by review: a misspelled layer printed {} (two engines "agreed"), and
        `layers: landing` hashed the layers l, a, n, ... -#}
    {%- for name, value in [('layers', layers), ('exclude', exclude)]
        if value is not none and (value is string or value is not iterable) -%}
        {%- do exceptions.raise_compiler_error(
            "table_checksums: " ~ name ~ " must be a list, e.g. {" ~ name ~ ": [" ~ value ~ "]}") -%}
    {%- endfor -%}
    {%- set known = [] -%}
    {%- for node in graph.nodes.values() if node.resource_type == 'model' -%}
        {%- do known.append(node.fqn[1]) -%}
    {%- endfor -%}
    {%- for each in (layers or [layer]) if each not in known -%}
        {%- do exceptions.raise_compiler_error(
            "table_checksums: no model is in the layer " ~ each ~ "; the layers are "
            ~ (known | unique | sort | join(', '))) -%}
    {%- endfor -%}
    {%- set by_layer = {} -%}
    {%- for each in (layers or [layer]) -%}
        {%- do by_layer.update({each: dynamic_ddl.layer_checksums(each, exclude)}) -%}
    {%- endfor -%}
    {%- do log(tojson(by_layer if layers else by_layer[layer], sort_keys=true), info=True) -%}
{% endmacro %}


{#-- {"<table>": {"rows": n, "checksum": "..."}} for the tables of one layer. --#}
{% macro layer_checksums(layer, exclude) %}
    {%- set checksums = {} -%}
    {%- for node in graph.nodes.values()
        if node.resource_type == 'model' and node.fqn[1] == layer
        and node.config.materialized != 'ephemeral' -%}
        {%- set relation = adapter.get_relation(database=node.database, schema=node.schema, identifier=node.alias) -%}
        {%- if relation is none -%}
            {#- Named, not left out: a comparison must see a table one side lacks. -#}
            {%- do checksums.update({node.alias: {'rows': none, 'checksum': 'missing'}}) -%}
        {%- else -%}
            {%- set hashed, names = [], [] -%}
            {#- By name: a column added to an incremental table comes last, where a
                build from scratch may place it elsewhere. -#}
            {%- for column in adapter.get_columns_in_relation(relation) | sort(attribute='name')
                if column.name not in ['_commit_id', '_commit_ts', '_source_commit_id'] + exclude -%}
                {%- do hashed.append(dynamic_ddl.checksum_expression(column)) -%}
                {%- do names.append(column.name) -%}
            {%- endfor -%}
            {#- xxhash64 skips NULL arguments: which columns are NULL is hashed too, or
                ('x', NULL) and (NULL, 'x') would hash the same (found by review). -#}
            {%- set nulls = [] -%}
            {%- for name in names -%}
                {%- do nulls.append(adapter.quote(name) ~ ' is null') -%}
            {%- endfor -%}
            {%- set query -%}
                select count(*), cast(coalesce(sum(cast(xxhash64({{ hashed | join(', ') }}, array({{ nulls | join(', ') }})) as decimal(38, 0))), 0) as string)
                from {{ relation }}
            {%- endset -%}
            {%- set row = run_query(query).rows[0] -%}
            {%- do checksums.update({relation.identifier: {'rows': row[0], 'checksum': row[1], 'columns': names}}) -%}
        {%- endif -%}
    {%- endfor -%}
    {{- return(checksums) -}}
{% endmacro %}


{#-- A column as it enters the row hash: doubles rounded, maps as sorted entries. --#}
{% macro checksum_expression(column) %}
    {%- set name = adapter.quote(column.name) -%}
    {%- set data_type = column.dtype | lower -%}
    {%- if data_type in ['double', 'float'] -%}
        {{- return('round(' ~ name ~ ', 6)') -}}
    {%- elif data_type.startswith('map<') -%}
        {{- return('array_sort(map_entries(' ~ name ~ '))') -}}
    {%- endif -%}
    {{- return(name) -}}
{% endmacro %}

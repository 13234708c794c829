{#
    Pivot key/value rows into one column per key, for keys found at run time
    (the Dynamic DDL talk's `max(case when record_key = 'state' then
    record_value end)`), grouped by the entity columns.

    Keys come from the rows that `where` selects (one aggregate over the key
    column, so on an incremental run only the new batch is read), plus, on
    an incremental run, the pivot columns `this` already has: their columns
    are kept (NULL for rows without the key), so a new key only adds a
    column. When the cap must choose, pinned keys (`pin`, the keys of
    `types`) come first, then the keys the most rows carry: a flood of keys
    from one misbehaving device cannot take the columns models read.
    Columns are sorted by name: the same input renders the same SQL.

    A key repeated within a group keeps its greatest value; with `latest_by`
    (columns ordering the rows, e.g. the raw lineage `_batch_id`,
    `_line_number`) its newest non-NULL value instead, in the columns and in
    `_overflow` alike, so a group pivoted from all its rows at once holds
    what a newer batch sent last.

    Every column the model gets from the pivot is one of: `group_by`,
    `carry`, a pivot column (never starting with `_`), `_overflow` (keys
    beyond `max_columns`, or outside `allow`: key -> value) and
    `_unconverted` (values the `types` map could not convert: key -> text).
    Keys in `deny` are dropped. Without `execute` (dbt parse, the linter)
    the keys are `default_keys`.

    Example:
        {{ pivot_key_values(
            ref('raw_app_attributes'), group_by=['id', 'log_ts'],
            types={'storage_used_gb': 'double'}, default_keys=['city']
        ) }}

    Arguments:
        relation: the key/value rows: a relation, or a parenthesized subquery, required
        group_by: columns identifying a pivoted row (entity key, timestamp), required
        key_column: column holding the key, default `record_key`
        value_column: column holding the value as text, default `record_value`
        where: SQL filter on the rows to pivot (and to discover keys in), default `true`
        carry: columns carried along as max(column), e.g. `_batch_id`, default none
        keys: a fixed key list instead of discovery, default none (discover)
        types: key -> Spark type to cast its value to (try_cast), default all text
        prefix: prepended to every pivot column name, default ''
        max_columns: the most pivot columns the table may have, default 200 (a pinned
            or typed key arriving when it is full still gets its column)
        allow: only these keys become columns (the rest go to `_overflow`), default all
        deny: keys dropped altogether, default none
        default_keys: the keys when not executing (parse, lint), default none
        pin: keys that take a column before any other (those a model reads), default none
        latest_by: columns ordering a group's rows: a repeated key keeps its newest
            non-NULL value, default none (its greatest value)
#}
{% macro pivot_key_values(
    relation,
    group_by,
    key_column='record_key',
    value_column='record_value',
    where='true',
    carry=[],
    keys=none,
    types={},
    prefix='',
    max_columns=200,
    allow=none,
    deny=[],
    default_keys=[],
    pin=[],
    latest_by=[]
) -%}
    {#- What shapes the rows, for an upsert model's table to record: a run that pivots
        another way is refused, naming --full-refresh (rows pivoted before would stay). -#}
    {%- if execute and model is defined and model.get('resource_type') == 'model' -%}
        {#- None is "unset" only where it means so: `allow` and `keys` none and [] differ,
            and a `prefix` none builds other names than ''. The order of `keys` counts
            only past the cap (pivot_plan admits them in order). -#}
        {%- set keys_ordered = keys is not none and keys | length > max_columns -%}
        {%- do adapter.note_rows_built_with(this, 'pivot_key_values', {
            'group_by': group_by, 'key_column': key_column, 'value_column': value_column,
            'carry': carry or [], 'keys': keys, 'types': types or {}, 'prefix': prefix,
            'max_columns': max_columns, 'allow': allow, 'deny': deny or [], 'pin': pin or [],
            'latest_by': latest_by or []},
            ordered=['latest_by'] + (['keys'] if keys_ordered else [])) -%}
    {%- endif -%}
    {{ return(adapter.dispatch('pivot_key_values', 'dynamic_ddl')(
        relation, group_by, key_column, value_column, where, carry, keys, types,
        prefix, max_columns, allow, deny, default_keys, pin, latest_by
    )) }}
{%- endmacro %}

{% macro default__pivot_key_values(
    relation, group_by, key_column, value_column, where, carry, keys, types,
    prefix, max_columns, allow, deny, default_keys, pin=[], latest_by=[]
) -%}
    {%- set types = types or {} -%}
    {%- do dynamic_ddl.validate_pivot_arguments(group_by, carry, types, prefix, max_columns, latest_by) -%}
    {%- set existing = dynamic_ddl.existing_pivot_columns(group_by, carry) -%}
    {#- Pinned: the model's keys, and existing columns named by their key (plain names). -#}
    {%- set pinned = (pin or []) + (types.keys() | list) + (existing | map(attribute='name') | list) -%}
    {%- if keys is none -%}
        {#- Unqualified, so a dbt unit test can override it (`overrides: macros:`). -#}
        {%- set keys = discover_pivot_keys(
            relation, key_column, where, allow, deny, default_keys,
            pinned, max_columns + (existing | length) + (pinned | length)) -%}
    {%- endif -%}
    {%- set columns = dynamic_ddl.pivot_plan(
        keys, existing, group_by, carry, types, prefix, max_columns, allow, deny, pinned,
        (pin or []) + (types.keys() | list)) -%}
    {%- set key = adapter.quote(key_column) -%}
    {%- set value = adapter.quote(value_column) -%}
    {%- set fed = columns | rejectattr('key', 'none') | list -%}
    {%- set kept_out = (fed | map(attribute='key') | list) + (deny or []) -%}
    {#- With latest_by, a value's rank: the newest row holding one wins. -#}
    {%- set newest -%}
        struct(
            {%- for column in latest_by -%}
            pivot_rows.{{ adapter.quote(column) }}, {% endfor -%}
            pivot_rows.{{ value }})
    {%- endset %}
    select
        {%- for column in group_by + carry %}
        pivoted.{{ adapter.quote(column) }},
        {%- endfor %}
        {%- for column in columns %}
        {%- if column.key is none %}
        cast(null as {{ column.type }}) as {{ adapter.quote(column.name) }},
        {%- elif column.type == 'string' %}
        pivoted.{{ adapter.quote(column.name) }},
        {%- else %}
        {{ dynamic_ddl.pivot_converted('pivoted.' ~ adapter.quote(column.name), column.type) }} as {{ adapter.quote(column.name) }},
        {%- endif %}
        {%- endfor %}
        {{ dynamic_ddl.pivot_overflow('pivoted._overflow_entries') }} as _overflow,
        {{ dynamic_ddl.pivot_unconverted(fed | rejectattr('type', 'equalto', 'string') | list) }} as _unconverted

    from (
        select
            {%- for column in group_by %}
            pivot_rows.{{ adapter.quote(column) }},
            {%- endfor %}
            {%- for column in carry %}
            max(pivot_rows.{{ adapter.quote(column) }}) as {{ adapter.quote(column) }},
            {%- endfor %}
            {%- for column in fed %}
            {%- if latest_by %}
            max_by(pivot_rows.{{ value }}, case
                when pivot_rows.{{ key }} = {{ dynamic_ddl.pivot_literal(column.key) }}
                    and pivot_rows.{{ value }} is not null then {{ newest }} end
            ) as {{ adapter.quote(column.name) }},
            {%- else %}
            max(
                case when pivot_rows.{{ key }} = {{ dynamic_ddl.pivot_literal(column.key) }} then pivot_rows.{{ value }} end
            ) as {{ adapter.quote(column.name) }},
            {%- endif %}
            {%- endfor %}
            array_sort(collect_list(
                case when pivot_rows.{{ key }} is not null
                    {%- if kept_out %}
                    and pivot_rows.{{ key }} not in (
                        {%- for kept in kept_out -%}
                            {{ dynamic_ddl.pivot_literal(kept) }}{{ ', ' if not loop.last }}
                        {%- endfor -%}
                    )
                    {%- endif %}
                    {%- if latest_by %}
                    then struct(
                        pivot_rows.{{ key }} as key,
                        pivot_rows.{{ value }} is not null as has_value,
                        {{ newest }} as newest,
                        pivot_rows.{{ value }} as value
                    ) end
                    {%- else %}
                    then struct(pivot_rows.{{ key }} as key, pivot_rows.{{ value }} as value) end
                    {%- endif %}
            )) as _overflow_entries
        from {{ relation }} as pivot_rows
        where {{ where }}
        group by
            {%- for column in group_by %}
            pivot_rows.{{ adapter.quote(column) }}{{ ',' if not loop.last }}
            {%- endfor %}
    ) as pivoted
{%- endmacro %}


{#
    On an incremental run, the pivot columns `this` has (name and type): every
    column that is neither a group or carried column nor starts with `_`.
#}
{% macro existing_pivot_columns(group_by, carry) -%}
    {%- if not (execute and is_incremental()) -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set fixed = (group_by + carry) | map('lower') | list -%}
    {%- set found = [] -%}
    {%- for column in adapter.get_columns_in_relation(this) -%}
        {%- if column.name | lower not in fixed and not column.name.startswith('_') -%}
            {%- do found.append({'name': column.name | lower, 'type': column.dtype | lower}) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(found) }}
{%- endmacro %}


{#
    The pivot's columns: one per key that has or gets a column, sorted by
    name, as {key, name, type}; `key` is none for an existing column no key
    of this batch feeds (it stays, NULL). Existing columns always stay; new
    keys are admitted in rank order (`pinned` first, then the order of
    `keys`, which discovery ranks by the rows carrying them) while the table
    has fewer than `max_columns`; the rest go to `_overflow`. A key in
    `always` (the model's pins and typed keys) gets its column even when the
    cap is full, so an incremental run admits it as a build from scratch
    (which ranks it first) does.

    Two keys whose names collide (their hashes share 8 hex digits: crafted
    keys do) cannot both feed one column: the first in key order keeps the
    name, the others get their whole MD5 (`city__<32 hex>`), then a counter.
#}
{% macro pivot_plan(keys, existing, group_by, carry, types, prefix, max_columns, allow, deny, pinned=[], always=[]) -%}
    {%- set taken = (group_by + carry) | map('lower') | list -%}
    {%- set by_name = {} -%}
    {%- for column in existing -%}
        {%- do by_name.update({column.name: {'key': none, 'name': column.name, 'type': column.type}}) -%}
    {%- endfor -%}
    {%- set candidates = keys | unique(case_sensitive=true) | reject('in', deny or []) | list -%}
    {%- set column_types = {} -%}
    {%- for key in candidates -%}
        {%- do column_types.update({key: dynamic_ddl.pivot_type(types.get(key, 'string'))}) -%}
    {%- endfor -%}
    {%- set plain_names = {} -%}
    {%- for key in candidates -%}
        {%- do plain_names.update({key: dynamic_ddl.pivot_column_name(key, prefix, taken)}) -%}
    {%- endfor -%}
    {#- A name two keys share: the first in key order keeps it, the next get their whole MD5, then a counter. -#}
    {%- set column_names = {} -%}
    {%- for key in candidates | sort(case_sensitive=true) -%}
        {%- set wanted = plain_names[key] -%}
        {%- if wanted in column_names.values() -%}
            {%- set wanted = wanted.rsplit('__', 1)[0] ~ '__' ~ local_md5(key) -%}
        {%- endif -%}
        {%- set unique = {'name': wanted} -%}
        {%- for counter in range(2, 2 + (column_names | length)) if unique.name in column_names.values() -%}
            {%- do unique.update({'name': wanted ~ '_' ~ counter}) -%}
        {%- endfor -%}
        {%- do column_names.update({key: unique.name}) -%}
    {%- endfor -%}
    {%- set ranked = (candidates | select('in', pinned or []) | list)
        + (candidates | reject('in', pinned or []) | list) -%}
    {%- for key in ranked -%}
        {%- set column = column_names[key] -%}
        {%- set admitted = (key in always or by_name | length < max_columns) and (allow is none or key in allow) -%}
        {%- if column in by_name or admitted -%}
            {%- do by_name.update({column: {'key': key, 'name': column, 'type': column_types[key]}}) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(by_name | dictsort(case_sensitive=true) | map(attribute=1) | list) }}
{%- endmacro %}


{#
    The column name of a pivot key: deterministic and collision-free.

    A key that is already a plain lowercase name (`[a-z][a-z0-9]*` words
    joined by single `_`, at most 64 characters with the prefix, not a
    reserved word nor a group column) is its own name. Any other key gets
    its characters other than a-z0-9 as `_`, cut to 40, plus `__` and 8 hex
    of its MD5: `State` -> `state__8b4e0b6a`. Plain names never hold `__`,
    so the two kinds never meet; two keys only share a name if their hashes
    do, which `pivot_plan` resolves (the later key gets its whole MD5).

    Example:
        {{ dynamic_ddl.pivot_column_name('First Name') }}  -> first_name__<8 hex>

    Arguments:
        key: the key, required
        prefix: prepended to the name, default ''
        taken: names the key must not take (the group columns), default none
#}
{% macro pivot_column_name(key, prefix='', taken=[]) -%}
    {%- set plain = prefix ~ key -%}
    {%- if modules.re.fullmatch('[a-z][a-z0-9]*(_[a-z0-9]+)*', key)
        and plain | length <= 64
        and plain not in taken
        and plain | upper not in dynamic_ddl.spark_reserved_words() -%}
        {{ return(plain) }}
    {%- endif -%}
    {%- set base = modules.re.sub('[^a-z0-9]+', '_', key | lower).strip('_')[:40].strip('_') -%}
    {{ return(prefix ~ (base or 'key') ~ '__' ~ local_md5(key)[:8]) }}
{%- endmacro %}


{#
    A key as a Spark string literal: backslashes, quotes and line breaks
    escaped, so no key can end the literal (dynamic_ddl/sql_text.py, the one
    place values become literals, through the adapter).
#}
{% macro pivot_literal(key) -%}
    {{ return(adapter.string_literal(key)) }}
{%- endmacro %}


{# A type from the `types` map, checked against the types a value can be cast to. #}
{% macro pivot_type(type) -%}
    {%- set normalized = type | lower | replace(' ', '') -%}
    {%- if not modules.re.fullmatch(
        '(string|boolean|tinyint|smallint|int|bigint|float|double|date|timestamp|timestamp_ntz|decimal[(][0-9]+,[0-9]+[)])',
        normalized) -%}
        {%- do exceptions.raise_compiler_error(
            "Pivot type '" ~ type ~ "' is not supported. Use one of string, boolean, int, bigint, "
            ~ "double, decimal(p,s), date, timestamp.") -%}
    {%- endif -%}
    {{ return(normalized) }}
{%- endmacro %}


{#
    `_overflow` from the group's sorted entries that got no column (key,
    value; with latest_by key, has_value, newest, value): a key -> value
    map, the last entry of a key winning (the greatest value, or the newest
    non-NULL one, as in the columns); NULL when there are none.
#}
{% macro pivot_overflow(entries) -%}
    case when size({{ entries }}) > 0 then map_from_entries(transform(filter(
            {{ entries }}, (entry, i) -> i = size({{ entries }}) - 1 or {{ entries }}[i + 1].key != entry.key
        ), entry -> struct(entry.key, entry.value))) end
{%- endmacro %}


{#
    A pivoted text value in `data_type`, NULL when it does not convert. Spark's
    cast reads `1e400`, `Infinity` and `NaN` as doubles no column should hold
    (found by review: a typed key stored Infinity): a double or float takes a
    finite decimal number only.
#}
{% macro pivot_converted(expression, data_type) -%}
    {%- if data_type | lower in ['double', 'float'] -%}
        case
            when {{ expression }} rlike '^[ ]*[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?[ ]*$'
                and abs(try_cast({{ expression }} as double)) <= 1.7976931348623157e308
                then try_cast({{ expression }} as {{ data_type }})
        end
    {%- else -%}
        try_cast({{ expression }} as {{ data_type }})
    {%- endif -%}
{%- endmacro %}


{#
    `_unconverted`: key -> text of the `typed` columns' values that did not
    convert (the typed column is NULL, the text is kept here); NULL when none.
#}
{% macro pivot_unconverted(typed) -%}
    {%- if not typed -%}
        cast(null as map<string, string>)
    {%- else -%}
        {%- set texts -%}
            map_filter(map(
                {%- for column in typed %}
                {{ dynamic_ddl.pivot_literal(column.key) }},
                case
                    when {{ dynamic_ddl.pivot_converted('pivoted.' ~ adapter.quote(column.name), column.type) }} is null
                        then pivoted.{{ adapter.quote(column.name) }}
                end{{ ',' if not loop.last }}
                {%- endfor %}
            ), (unconverted_key, unconverted_text) -> unconverted_text is not null)
        {%- endset -%}
        case when size({{ texts }}) > 0 then {{ texts }} end
    {%- endif -%}
{%- endmacro %}


{# Arguments that would render wrong SQL, refused with the fix. #}
{% macro validate_pivot_arguments(group_by, carry, types, prefix, max_columns, latest_by=[]) -%}
    {%- if group_by is string or not group_by -%}
        {%- do exceptions.raise_compiler_error(
            "pivot_key_values needs group_by as a list of columns, e.g. group_by=['id', 'log_ts'].") -%}
    {%- endif -%}
    {%- if carry is string -%}
        {%- do exceptions.raise_compiler_error("pivot_key_values needs carry as a list, e.g. carry=['_batch_id'].") -%}
    {%- endif -%}
    {%- if latest_by is string -%}
        {%- do exceptions.raise_compiler_error(
            "pivot_key_values needs latest_by as a list, e.g. latest_by=['_batch_id', '_line_number'].") -%}
    {%- endif -%}
    {%- if types is not mapping -%}
        {%- do exceptions.raise_compiler_error(
            "pivot_key_values needs types as a key -> type map, e.g. {'storage_used_gb': 'double'}.") -%}
    {%- endif -%}
    {%- for type in types.values() -%}
        {%- do dynamic_ddl.pivot_type(type) -%}
    {%- endfor -%}
    {%- if prefix and not modules.re.fullmatch('[a-z][a-z0-9_]*', prefix) -%}
        {%- do exceptions.raise_compiler_error(
            "Pivot prefix '" ~ prefix ~ "' must be lowercase letters, digits and _, starting with a letter.") -%}
    {%- endif -%}
    {%- if max_columns is not number or max_columns < 0 -%}
        {%- do exceptions.raise_compiler_error("Pivot max_columns must be a number >= 0, got " ~ max_columns ~ ".") -%}
    {%- endif -%}
{%- endmacro %}


{# Spark's ANSI reserved words: keys equal to one are not used as bare names. #}
{% macro spark_reserved_words() -%}
    {{ return([
        'ALL', 'AND', 'ANY', 'ARRAY', 'AS', 'AUTHORIZATION', 'BOTH', 'CASE', 'CAST', 'CHECK', 'COLLATE',
        'COLUMN', 'CONSTRAINT', 'CREATE', 'CROSS', 'CURRENT_DATE', 'CURRENT_TIME', 'CURRENT_TIMESTAMP',
        'CURRENT_USER', 'DISTINCT', 'ELSE', 'END', 'ESCAPE', 'EXCEPT', 'FALSE', 'FETCH', 'FILTER', 'FOR',
        'FOREIGN', 'FROM', 'FULL', 'GRANT', 'GROUP', 'HAVING', 'IN', 'INNER', 'INTERSECT', 'INTO', 'IS',
        'JOIN', 'LATERAL', 'LEADING', 'LEFT', 'NATURAL', 'NOT', 'NULL', 'OFFSET', 'ON', 'ONLY', 'OR',
        'ORDER', 'OUTER', 'OVERLAPS', 'PRIMARY', 'REFERENCES', 'RIGHT', 'SELECT', 'SESSION_USER', 'SOME',
        'TABLE', 'THEN', 'TIME', 'TO', 'TRAILING', 'UNION', 'UNIQUE', 'UNKNOWN', 'USER', 'USING', 'WHEN',
        'WHERE', 'WITH'
    ]) }}
{%- endmacro %}

{#
    No raw personal value (device serial, name, email, IP address) appears in
    any text column of any production model: each is masked or dropped first.
    Returns the leaks: table, column and the value.
#}
-- depends_on: {{ ref('dim_users') }}
-- depends_on: {{ ref('dim_devices') }}
-- depends_on: {{ ref('fct_daily_active_devices') }}
-- depends_on: {{ ref('dim_device_models') }}
-- depends_on: {{ ref('fct_media_daily') }}
-- depends_on: {{ ref('fct_firmware_adoption') }}
-- depends_on: {{ ref('agg_battery_health') }}

with

personal_values as (

    select
        explode(array(
            raw_device_events.data_device_serial,
            raw_device_events.data_record_email,
            raw_device_events.data_record_first_name,
            raw_device_events.data_record_last_name,
            raw_device_events.data_ip
        )) as personal_value
    from {{ ref('raw_device_events') }} as raw_device_events

    union all

    select raw_device_state.serial from {{ ref('raw_device_state') }} as raw_device_state

    union all

    select raw_app_attributes.record_value
    from {{ ref('raw_app_attributes') }} as raw_app_attributes
    where raw_app_attributes.record_key in ('email', 'first_name', 'last_name')

),

production_values as (

    {#- Every text value of every production model, with where it is. #}
    select
        cast(null as string) as leaked_table,
        cast(null as string) as leaked_column,
        cast(null as string) as leaked_value
    where false
    {%- if execute %}
    {%- for node in graph.nodes.values()
        if node.resource_type == 'model' and node.fqn[1] == 'production' %}
    {%- set relation = adapter.get_relation(node.database, node.schema, node.alias) %}
    {%- if relation is not none %}
    {%- for column in adapter.get_columns_in_relation(relation) if column.dtype == 'string' %}
    union all
    select
        '{{ node.name }}' as leaked_table,
        '{{ column.name }}' as leaked_column,
        production.{{ adapter.quote(column.name) }} as leaked_value
    from {{ relation }} as production
    {%- endfor %}
    {%- endif %}
    {%- endfor %}
    {%- endif %}

),

leaks as (

    select distinct production_values.*
    from production_values
    inner join personal_values
        on production_values.leaked_value = personal_values.personal_value

)

select * from leaks

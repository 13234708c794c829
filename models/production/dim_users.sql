{%- set attributes = ref('lnd_app_attributes') -%}
{#- Keys every report may hold: a column once a batch brings them (found by review: a
    provider that never sent `email` failed this model); unit tests give them. -#}
{%- set reported = {} -%}
{%- for key in ['email', 'city', 'state', 'language', 'app_version'] -%}
    {%- do reported.update({key: column_or_null(attributes, key, 'string', 'reports', in_unit_tests='column')}) -%}
{%- endfor -%}
{#- Keys the provider added later: NULL until a batch brings them. -#}
{%- set later_keys = {'theme': 'string', 'subscription_tier': 'string',
    'notifications_enabled': 'boolean', 'storage_used_gb': 'double'} %}

with

reports as (

    select * from {{ attributes }}

),

latest as (

    {#- Per user, each attribute's latest reported value (a report holds only some keys). #}
    select
        reports.id as user_id,
        {{ mask_pii(latest_value(reported['email'], 'reports.log_ts')) }} as email_hash,
        {{ latest_value(reported['city'], 'reports.log_ts') }} as city,
        {{ latest_value(reported['state'], 'reports.log_ts') }} as region,
        {{ latest_value(reported['language'], 'reports.log_ts') }} as app_language,
        {{ latest_value(reported['app_version'], 'reports.log_ts') }} as app_version,
        {%- for name, data_type in later_keys.items() %}
            {{ latest_value(column_or_null(attributes, name, data_type, 'reports'), 'reports.log_ts') }} as {{ name }},
        {%- endfor %}
        max(reports.log_ts) as last_reported_at

    from reports

    group by reports.id

)

select * from latest

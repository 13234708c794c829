{%- set attributes = ref('lnd_app_attributes') -%}
{#- Keys every report may hold: a column once a batch brings them (found by review: a
    provider that never sent `email` failed this model); unit tests give them. -#}
{%- set reported = {} -%}
{%- for key in ['email', 'city', 'state', 'language', 'app_version'] -%}
    {%- do reported.update({key: column_or_null(attributes, key, 'string', 'reports', in_unit_tests='column')}) -%}
{%- endfor -%}
{#- Keys the provider added later: NULL until a batch brings them. -#}
{%- set later_keys = {'theme': 'string', 'subscription_tier': 'string',
    'notifications_enabled': 'boolean', 'storage_used_gb': 'double'} -%}
{#- A report whose time could not be read (landing keeps it with log_ts NULL, one per
    user) ranks below every timed one: found by review, its values were never taken,
    a user whose only email came so had none. #}
{%- set reported_at = "coalesce(reports.log_ts, timestamp '0001-01-01 00:00:00')" %}

with

reports as (

    select * from {{ attributes }}

),

latest as (

    {#- Per user, each attribute's latest reported value (a report holds only some keys). #}
    select
        reports.id as user_id,
        {{ mask_pii(latest_value(reported['email'], reported_at)) }} as email_hash,
        {{ latest_value(reported['city'], reported_at) }} as city,
        {{ latest_value(reported['state'], reported_at) }} as region,
        {{ latest_value(reported['language'], reported_at) }} as app_language,
        {{ latest_value(reported['app_version'], reported_at) }} as app_version,
        {%- for name, data_type in later_keys.items() %}
            {{ latest_value(column_or_null(attributes, name, data_type, 'reports'), reported_at) }} as {{ name }},
        {%- endfor %}
        max(reports.log_ts) as last_reported_at

    from reports

    group by reports.id

)

select * from latest

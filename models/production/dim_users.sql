{%- set attributes = ref('lnd_app_attributes') -%}
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
        {{ mask_pii(latest_value('reports.email', 'reports.log_ts')) }} as email_hash,
        {{ latest_value('reports.city', 'reports.log_ts') }} as city,
        {{ latest_value('reports.state', 'reports.log_ts') }} as region,
        {{ latest_value('reports.language', 'reports.log_ts') }} as app_language,
        {{ latest_value('reports.app_version', 'reports.log_ts') }} as app_version,
        {%- for name, data_type in later_keys.items() %}
            {{ latest_value(column_or_null(attributes, name, data_type, 'reports'), 'reports.log_ts') }} as {{ name }},
        {%- endfor %}
        max(reports.log_ts) as last_reported_at

    from reports

    group by reports.id

)

select * from latest

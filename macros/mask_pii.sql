{#
    Personal data (serials, names, emails, IP addresses) as a salted SHA-256,
    so production can count and join on it without holding the value. The
    salt comes from the environment variable DYNAMIC_DDL_PII_SALT; without it
    a fixed development salt is used, which is fine for sample data only.

    Example:
        {{ mask_pii('lnd_device_state.serial') }} as device_key

    Arguments:
        expression: the SQL expression holding the personal value, required
#}
{% macro mask_pii(expression) -%}
    {%- set salt = env_var('DYNAMIC_DDL_PII_SALT', 'dynamic-ddl-development-salt') -%}
    sha2(concat({{ dynamic_ddl.pivot_literal(salt) }}, cast({{ expression }} as string)), 256)
{%- endmacro %}

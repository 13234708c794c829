{#
    Personal data (serials, names, emails, IP addresses) as a salted SHA-256,
    so production can count and join on it without holding the value.

    The salt is never written into the SQL: the statement names the session
    variable `dynamic_ddl_pii_salt`, which the adapter declares on every
    session it opens, past dbt's query log (dynamic_ddl/pii.py):
    from the environment variable DYNAMIC_DDL_PII_SALT, or, on the embedded
    target only, from a random salt made once under .local/. A server target
    without DYNAMIC_DDL_PII_SALT refuses to build a model that masks.

    Example:
        {{ mask_pii('lnd_device_state.serial') }} as device_key

    Arguments:
        expression: the SQL expression holding the personal value, required
#}
{% macro mask_pii(expression) -%}
    {%- if execute and not adapter.has_pii_salt() -%}
        {%- do exceptions.raise_compiler_error(
            "No salt for personal data on target '" ~ target.name ~ "': set DYNAMIC_DDL_PII_SALT"
            ~ " (16 or more letters, digits or + / = _ . -, e.g. `openssl rand -hex 32`)"
            ~ " in the environment dbt runs in.") -%}
    {%- endif -%}
    sha2(concat(system.session.dynamic_ddl_pii_salt, cast({{ expression }} as string)), 256)
{%- endmacro %}

{#
    Which firmware each device ran, and from when to when: a row per firmware
    a device reported, valid from the state that first reported it
    (updated_at) until the state that reported the next one. A device
    decommissioned (its row leaves lnd_device_state) has its last row closed.

    Which firmware did a device run on a given day:
        select firmware from {{ ref('snp_device_firmware') }}
        where serial = 'SN00A1B2C3D4'
            and timestamp'2026-11-02' >= dbt_valid_from
            and (timestamp'2026-11-02' < dbt_valid_to or dbt_valid_to is null)

    A Parquet table, committed like an upsert (the adapter's snapshot
    materialization): `rollback_last_commit` undoes the last snapshot run.
#}
{% snapshot snp_device_firmware %}

    {{ config(
        unique_key='serial',
        strategy='check',
        check_cols=['firmware'],
        updated_at='updated_at',
        hard_deletes='invalidate'
    ) }}

    {#- exact_column: the firmware raw's column type could not hold is in its
        `__text` companion, which lnd_device_state passes through. #}
    {%- set state = ref('lnd_device_state') %}
    select
        device_state.serial,
        {{ exact_column(state, 'state_firmware', 'string', 'device_state') }} as firmware,
        device_state.updated_at

    from {{ state }} as device_state

{% endsnapshot %}

{#
    Rows of an upsert table changed since this model's last run (Hudi's
    incremental view), for a `where` clause of an incremental model.

    Rows carry `_commit_id`, the commit that last changed them. The filter
    keeps rows of commits that are wholly visible (up to the upstream's last
    finished commit, read once per run), and on an incremental run only those
    after the newest `_commit_id` this model has stored. So the model must
    carry `_commit_id` along (the upstream's, or max(_commit_id) per group).
    Neither table is read whole: the filter lists the upstream partitions
    that changed, and the newest id stored is read from this model's last
    commit (dynamic_ddl/upsert/increments.py).

    Example:
        select device_id, state, _commit_id
        from {{ ref('lnd_device_state') }}
        where {{ changed_since(ref('lnd_device_state')) }}

    Arguments:
        relation: the upsert table read, required
        column: this model's column holding the upstream commit id, default `_commit_id`
#}
{% macro changed_since(relation, column='_commit_id') %}
    {{- return(adapter.dispatch('changed_since')(relation, column)) -}}
{% endmacro %}

{% macro default__changed_since(relation, column) %}
    {%- if not execute -%}
        {{- return('true') -}}
    {%- endif -%}
    {{- return(adapter.changed_since_filter(relation, this if is_incremental() else none, column)) -}}
{% endmacro %}


{#
    Undo the last commit of an upsert model: its changed partitions read
    their previous version again. Only the last commit can be undone, once.

    Example:
        dbt run-operation rollback_last_commit --args '{model: lnd_device_state}'

    Arguments:
        model: the upsert model's name, required
#}
{% macro rollback_last_commit(model) %}
    {%- set relation = dynamic_spark_model_relation(model) -%}
    {%- set commit_id = adapter.rollback_upsert(relation) -%}
    {%- do log('Rolled back commit ' ~ commit_id ~ ' of ' ~ relation ~ '.', info=True) -%}
{% endmacro %}


{#
    An upsert table (or snapshot) as it was right after one of its kept
    commits: a subquery over its version store, for a `from` clause. With
    `keep_commits: N` (model config, default 1) each of its last N + 1
    commits is kept, and any commit pinned by a savepoint.

    Example:
        select serial, state_firmware
        from {{ as_of(ref('lnd_device_state'), '2026-11-20 00:00:00') }} as state_then

    Arguments:
        relation: the upsert table read, required
        at: a commit id (a `_commit_id` value, or a savepoint's), or a UTC time:
            the kept commit the table showed then, required
#}
{% macro as_of(relation, at) %}
    {%- if not execute -%}
        {{- return(relation) -}}
    {%- endif -%}
    {{- return(adapter.upsert_as_of(relation, at)) -}}
{% endmacro %}


{#
    Point an upsert model's table back at its state right after one of its
    kept commits (see as_of), by a new commit: partitions made since are
    dropped, and rollback_last_commit undoes the restore.

    Example:
        dbt run-operation rollback_to --args '{model: lnd_device_state, at: "2026-11-20 00:00:00"}'

    Arguments:
        model: the upsert model's name, required
        at: a commit id or a UTC time, as for as_of, required
#}
{% macro rollback_to(model, at) %}
    {%- set relation = dynamic_spark_model_relation(model) -%}
    {%- set commit_id = adapter.rollback_upsert_to(relation, at) -%}
    {%- if commit_id is none -%}
        {%- do log(relation ~ ' is as it was at ' ~ at ~ ' already: nothing to restore.', info=True) -%}
    {%- else -%}
        {%- do log('Restored ' ~ relation ~ ' as of ' ~ at ~ ' by commit ' ~ commit_id ~ '.', info=True) -%}
    {%- endif -%}
{% endmacro %}


{#-- The node of the model (or snapshot) named `model`; an error naming the fix if none. --#}
{% macro dynamic_spark_model_node(model) %}
    {%- set node = graph.nodes.values() | selectattr('name', 'equalto', model) | first -%}
    {%- if node is not defined or node is none -%}
        {%- do exceptions.raise_compiler_error(
            "No model named '" ~ model ~ "'. Pass the model's name, e.g. --args '{model: lnd_device_state}'.") -%}
    {%- endif -%}
    {{ return(node) }}
{% endmacro %}


{#-- The table of the model (or snapshot) named `model`. --#}
{% macro dynamic_spark_model_relation(model) %}
    {%- set node = dynamic_spark_model_node(model) -%}
    {{ return(api.Relation.create(schema=node.schema, identifier=node.alias, type='table')) }}
{% endmacro %}


{#
    Pin a kept commit of an upsert model: its files stay, and the table can
    be read as of it (as_of) and restored to it (rollback_to), whatever its
    keep_commits, until release_savepoint.

    Example:
        dbt run-operation savepoint --args '{model: lnd_device_state, at: "2026-11-20 00:00:00"}'

    Arguments:
        model: the upsert model's name, required
        at: a commit id or a UTC time, as for as_of, required
#}
{% macro savepoint(model, at) %}
    {%- set relation = dynamic_spark_model_relation(model) -%}
    {%- set commit_id = adapter.upsert_savepoint(relation, at) -%}
    {%- do log('Savepoint on commit ' ~ commit_id ~ ' of ' ~ relation ~ '.', info=True) -%}
{% endmacro %}


{#
    Unpin a savepoint (see savepoint); the model's next commit drops the
    files nothing else keeps.

    Example:
        dbt run-operation release_savepoint --args '{model: lnd_device_state, at: "20261120000000000000"}'

    Arguments:
        model: the upsert model's name, required
        at: the savepoint's commit id (savepoint logs it), required
#}
{% macro release_savepoint(model, at) %}
    {%- set relation = dynamic_spark_model_relation(model) -%}
    {%- set commit_id = adapter.upsert_savepoint(relation, at, release=true) -%}
    {%- do log('Released the savepoint on commit ' ~ commit_id ~ ' of ' ~ relation ~ '.', info=True) -%}
{% endmacro %}


{#
    Remove what an upsert model's version store holds and its retention
    (keep_commits, keep_days in the model's config) does not keep, and the
    orphans of writes killed mid-job: version folders no partition lists,
    and the job folders (`_temporary`, `.spark-staging-*`) on a local disk.
    A commit already drops old versions; orphans only vacuum finds.

    Example:
        dbt run-operation vacuum --args '{model: lnd_device_state}'

    Arguments:
        model: the upsert model's (or snapshot's) name, required
#}
{% macro vacuum(model) %}
    {%- set node = dynamic_spark_model_node(model) -%}
    {%- set relation = dynamic_spark_model_relation(model) -%}
    {%- set options = {
        'keep_commits': node.config.get('keep_commits'),
        'keep_days': node.config.get('keep_days'),
    } -%}
    {%- set done = adapter.vacuum_upsert(relation, options) -%}
    {%- set folders = 'job folders not looked at (the store is not on a local disk)'
        if done['job_folders'] is none
        else 'removed ' ~ done['job_folders'] ~ ' folders of killed write jobs' -%}
    {%- do log('Vacuumed ' ~ relation ~ ': dropped ' ~ done['dropped_versions']
        ~ ' partition versions its retention does not keep (' ~ done['orphans']
        ~ ' of them orphans no partition listed); ' ~ folders ~ '.', info=True) -%}
{% endmacro %}


{#
    Rewrite an upsert model's table under new partition columns and swap it
    in: readers see its rows, whole, throughout; a killed run is undone or
    finished by the next writer. Rows keep their `_commit_id`, so downstream
    models need no full refresh; history before it (as_of, rollback_to) is
    gone, and savepoints must be released first; a layout that would put two
    rows of one key in one partition (no global_key) is refused. Then set the model's
    partition_by to the same columns: its next run fails, saying so, until
    they match.

    Example:
        dbt run-operation repartition --args '{model: lnd_device_events, partition_by: [event_date, country]}'

    Arguments:
        model: the upsert model's (or snapshot's) name, required
        partition_by: a column or a list of columns of the table, required
#}
{% macro repartition(model, partition_by) %}
    {%- set node = dynamic_spark_model_node(model) -%}
    {%- set relation = dynamic_spark_model_relation(model) -%}
    {#- A snapshot's rows are keyed by dbt_scd_id, unique across its table. -#}
    {%- set snapshot = node.resource_type == 'snapshot' -%}
    {%- set commit_id = adapter.repartition_upsert(
        relation, partition_by, node.config.get('tombstone_days'),
        none if snapshot else node.config.get('unique_key'),
        snapshot or node.config.get('global_key', false)) -%}
    {%- if commit_id is none -%}
        {%- do log(relation ~ ' is partitioned by ' ~ partition_by ~ ' already: nothing to do.', info=True) -%}
    {%- else -%}
        {%- do log('Repartitioned ' ~ relation ~ ' by ' ~ partition_by ~ ' (version ' ~ commit_id
            ~ '). Set partition_by in the config of ' ~ model ~ ' to match.', info=True) -%}
    {%- endif -%}
{% endmacro %}

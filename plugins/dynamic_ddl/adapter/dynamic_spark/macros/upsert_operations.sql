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
    {%- set node = graph.nodes.values() | selectattr('name', 'equalto', model) | first -%}
    {%- if node is not defined or node is none -%}
        {%- do exceptions.raise_compiler_error(
            "No model named '" ~ model ~ "'. Pass the model's name, e.g. --args '{model: lnd_device_state}'.") -%}
    {%- endif -%}
    {%- set relation = api.Relation.create(schema=node.schema, identifier=node.alias, type='table') -%}
    {%- set commit_id = adapter.rollback_upsert(relation) -%}
    {%- do log('Rolled back commit ' ~ commit_id ~ ' of ' ~ relation ~ '.', info=True) -%}
{% endmacro %}

{#
    Nothing is lost: for every committed batch of every topic, the lines in
    its files equal the rows it wrote to the raw table plus the lines it
    quarantined, and every raw or quarantined row belongs to a committed batch.
    Returns the batches where they differ.
#}
with

-- The ledger is its batches' entries and its archive's, each entry once.
ledger_entries as (

    select
        topic,
        batch_id,
        path,
        first_line,
        line_count

    from {{ source('ingestion', 'raw_file_ledger') }}

    where state = 'committed'

    union

    select
        topic,
        batch_id,
        path,
        first_line,
        line_count

    from {{ source('ingestion', 'raw_file_ledger_archive') }}

),

ledger as (

    select
        topic,
        batch_id,
        sum(line_count) as input_lines

    from ledger_entries

    group by 1, 2

),

raw_rows as (

    {% for topic in var('raw_topics') %}
        select
            '{{ topic }}' as topic,
            _batch_id as batch_id,
            count(*) as raw_rows

        from {{ ref('raw_' ~ topic) }}

        group by 1, 2
        {% if not loop.last %}union all{% endif %}
    {% endfor %}

),

quarantined as (

    select
        topic,
        batch_id,
        count(*) as quarantined_lines

    from {{ source('ingestion', 'raw_quarantine') }}

    group by 1, 2

),

accounted as (

    select
        ledger.input_lines,
        coalesce(ledger.topic, raw_rows.topic, quarantined.topic) as topic,
        coalesce(ledger.batch_id, raw_rows.batch_id, quarantined.batch_id) as batch_id,
        coalesce(raw_rows.raw_rows, 0) as raw_rows,
        coalesce(quarantined.quarantined_lines, 0) as quarantined_lines

    from ledger

    full outer join raw_rows
        on ledger.topic = raw_rows.topic and ledger.batch_id = raw_rows.batch_id

    full outer join quarantined
        on
            coalesce(ledger.topic, raw_rows.topic) = quarantined.topic
            and coalesce(ledger.batch_id, raw_rows.batch_id) = quarantined.batch_id

)

select * from accounted

-- A batch's rows without its committed ledger entry are counted from no file.
where input_lines is null or input_lines != raw_rows + quarantined_lines

"""Landing rows: raw rows typed and keyed for the upsert (see dynamic_ddl.upsert)."""

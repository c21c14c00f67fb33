"""The IR shared by both tracks: data model (`core`), op kinds (`ops`), printer, verifier."""

"""Pure decisions over the model: no I/O, no clock but the view's, no rich, no typer."""

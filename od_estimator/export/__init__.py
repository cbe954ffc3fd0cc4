"""Export: SavedModel and frozen graph, their inputs, the TFLite SSD graph
and its conversion, the resize rewrite."""

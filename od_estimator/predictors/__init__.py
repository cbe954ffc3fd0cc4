"""Box predictors: turn feature maps into per-anchor boxes and scores."""

"""The protocols a site serves, one module each, over the site's shared services."""

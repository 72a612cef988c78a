from django.apps import AppConfig
from django.core.checks import Tags, register

from oanp_site.checks import production_secrets, transparency_log


class SiteConfig(AppConfig):
    """The deployment's own checks, which read the site's settings rather than an app's."""

    name = "oanp_site"
    verbose_name = "Site"

    def ready(self) -> None:
        # Not a deployment check: with DEBUG off, a development secret stops every start.
        register(production_secrets, Tags.security)
        register(transparency_log)

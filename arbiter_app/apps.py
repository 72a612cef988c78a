from django.apps import AppConfig


class ArbiterAppConfig(AppConfig):
    name = "arbiter_app"
    verbose_name = "Arbiter"

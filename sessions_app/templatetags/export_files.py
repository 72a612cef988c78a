from django import template
from django.db.models.fields.files import FieldFile
from django.template.defaultfilters import filesizeformat

from sessions_app import exports

register = template.Library()


@register.filter
def stored_size(stored: FieldFile) -> str:
    """An export file's size as people read it ("12.3 KB"), or "" when storage has none."""
    size = exports.stored_size(stored)
    return "" if size is None else filesizeformat(size)

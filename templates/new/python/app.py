"""The component's entry: componentize-py exports this module's ``Policy``."""

from {{module}} import {{type}}
from wasmsched.component import export

Policy = export({{type}})

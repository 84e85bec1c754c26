"""The component's entry: componentize-py exports this module's ``Policy``.

Build (from the repository root):
    componentize-py -d wit/0.3.0/policy.wit -w policy-plugin componentize \\
        -p policies/python/flowcon -p sdk/python app -o flowcon-py.wasm
"""

from flowcon import FlowCon
from wasmsched.component import export

Policy = export(FlowCon)

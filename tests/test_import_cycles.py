"""No import cycle among the modules of engine/ and app/, imports inside functions included.

import-linter's ``no-cycles`` contract (pyproject.toml) checks sibling packages at every depth;
this test checks the module graph itself with grimp (import-linter's graph library), so a
cycle through modules of different packages is named module by module.
"""

from __future__ import annotations

import grimp


def _module_graph() -> grimp.ImportGraph:
    # Imports under `if TYPE_CHECKING:` are annotations, not dependencies (as in the contracts).
    return grimp.build_graph("engine", "app", exclude_type_checking_imports=True)


def test_grimp_sees_imports_inside_functions():
    # The check is only as good as the graph: winnow's CLI imports the service layer inside
    # its commands, and the graph must hold those imports.
    graph = _module_graph()
    details = graph.get_import_details(importer="app.service.uploads", imported="app.io")
    assert details, "the function-level import of app.io in app.service.uploads is missing from the graph"


def test_no_module_of_engine_or_app_imports_itself_back():
    graph = _module_graph()
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycles.append(" -> ".join((importer, *back)))
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)

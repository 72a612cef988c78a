"""`make demo`: the site's processes supervised, the demo seeded and played live against
them. The demo's data and buyers are the dashboard's (:mod:`sessions_app.demo`); running them
as a deployment is the site's."""

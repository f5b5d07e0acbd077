"""Django with a converted auth_user (block django/accounts/models.py):
after idgen_convert_column('auth_user', 'id'), a plain ForeignKey to User
makes an integer column that a new user's ID does not fit (22003), and
UserForeignKey makes a bigint one; and a test database made by a role that
is not a superuser, with and without a template that has the extension.
"""

import os
import sys

import django
import psycopg2
from django.conf import settings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from check import check, check_id, run, sql  # noqa: E402

DB = {
    "ENGINE": "django.db.backends.postgresql",
    "HOST": os.environ["PGHOST"],
    "PORT": os.environ["PGPORT"],
    "USER": os.environ["PGUSER"],
    "NAME": os.environ["PGDATABASE"],
}
settings.configure(
    INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "django.contrib.postgres",
                    "accounts"],
    DATABASES={
        "default": DB,
        # Test databases made by a role that may create databases, nothing more.
        "plain": dict(DB, USER="django_app", TEST={"NAME": "django_test_plain"}),
        "templated": dict(DB, USER="django_app",
                          TEST={"NAME": "django_test_templated", "TEMPLATE": "template_idgen_django"}),
    },
    USE_TZ=True,
)
django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.db import DataError, connection, connections, models  # noqa: E402
from django.core.management import call_command  # noqa: E402


def admin(query, dbname=os.environ["PGDATABASE"]):
    """A statement as the superuser, outside a transaction block."""
    conn = psycopg2.connect(dbname=dbname)
    conn.autocommit = True
    try:
        conn.cursor().execute(query)
    finally:
        conn.close()


def column_type(table, column):
    return sql("SELECT data_type FROM information_schema.columns"
               " WHERE table_name = %s AND column_name = %s", (table, column))


def body():
    call_command("migrate", "auth", verbosity=0)
    old = User.objects.create(username="old")
    sql("SELECT idgen_convert_column('auth_user', 'id')")
    check("idgen_convert_column makes auth_user.id and the columns that refer to it bigint",
          column_type("auth_user", "id") == [("bigint",)]
          and column_type("auth_user_groups", "user_id") == [("bigint",)])
    new = User.objects.create(username="new")
    check_id("Django User after conversion", "auth_user", new.pk)
    check("the old user keeps its number", old.pk < 2 ** 31 < new.pk, (old.pk, new.pk))
    check("Django 3.2 finds the new user by its ID", User.objects.get(pk=new.pk).username == "new")

    from accounts.models import Profile

    class PlainProfile(models.Model):
        user = models.ForeignKey(User, on_delete=models.CASCADE)

        class Meta:
            app_label = "accounts"

    with connection.schema_editor() as editor:
        editor.create_model(PlainProfile)
        editor.create_model(Profile)
    check("a plain ForeignKey to User makes an integer column",
          column_type("accounts_plainprofile", "user_id") == [("integer",)])
    try:
        PlainProfile.objects.create(user=new)
        error = None
    except DataError as e:
        error = e.__cause__.pgcode if e.__cause__ is not None else "no cause"
    check("a row referring to the new user then fails: integer out of range (22003)",
          error == "22003", error)
    check("UserForeignKey makes a bigint column",
          column_type("accounts_profile", "user_id") == [("bigint",)])
    profile = Profile.objects.create(user=new, bio="hi")
    check("a Profile of the new user is stored, and its user is found",
          Profile.objects.get(pk=profile.pk).user.username == "new")

    # Test databases: Django's test runner makes them as the configured role.
    sql("CREATE ROLE django_app LOGIN CREATEDB")
    try:
        connections["plain"].creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        error = None
    except Exception as e:  # noqa: BLE001: whatever the migration raised
        error = str(e)
    check("as a non-superuser, CREATE EXTENSION idgen in a test database from template1 fails",
          error is not None and 'permission denied to create extension "idgen"' in error, error)
    admin("CREATE DATABASE template_idgen_django")
    admin("CREATE EXTENSION idgen", "template_idgen_django")
    admin("ALTER DATABASE template_idgen_django IS_TEMPLATE true")
    try:
        name = connections["templated"].creation.create_test_db(
            verbosity=0, autoclobber=True, serialize=False)
        with connections["templated"].cursor() as cur:
            cur.execute("SELECT idgen_snowflake() > 0")
            error = None if cur.fetchone() == (True,) else "no id"
        connections["templated"].creation.destroy_test_db(name, verbosity=0)
    except Exception as e:  # noqa: BLE001
        error = str(e)
    check("with TEST's TEMPLATE having the extension, the test database is made and migrated",
          error is None, error)


run("Django, a converted auth_user", body)

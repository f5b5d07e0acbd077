# Active Record (blocks ruby/purchase.rb and ruby/schema_dumper.rb): the IDs
# and the business number a record gets, its JSON, the schema dump and
# load with and without the filter, db/structure.sql, and a test database
# made by a role that is not a superuser, from a template that has the
# extension.
require "active_record"
require "json"
require "stringio"

$failures = 0
def check(what, cond, detail = nil)
  if cond
    puts "ok: #{what}"
  else
    $failures += 1
    puts "not ok: #{what}#{detail.nil? ? "" : " (got #{detail.inspect})"}"
  end
  $stdout.flush
end

URL = ENV.fetch("DATABASE_URL")
def url(db, user = ENV.fetch("PGUSER"))
  "postgresql://#{user}@#{ENV.fetch("PGHOST")}:#{ENV.fetch("PGPORT")}/#{db}"
end
def sql(query, db = ENV.fetch("PGDATABASE"))
  conn = PG.connect(url(db))
  conn.exec(query).values
ensure
  conn&.close
end
def dump
  io = StringIO.new
  ActiveRecord::SchemaDumper.dump(ActiveRecord::Base.connection, io)
  io.string
end
# Load a schema.rb text into a new database; the error's message or nil.
# The superuser makes it with CREATE DATABASE; another role as the test
# tasks do (db:create, db:test:prepare), with TEMPLATE as database.yml's
# "template:".
def load_schema(schema, db, template: nil, user: ENV.fetch("PGUSER"))
  if user == ENV.fetch("PGUSER")
    sql(%(CREATE DATABASE "#{db}"))
  else
    config = { adapter: "postgresql", host: ENV.fetch("PGHOST"), port: ENV.fetch("PGPORT"),
               username: user, database: db, template: template }.compact
    ActiveRecord::Tasks::DatabaseTasks.create(
      ActiveRecord::DatabaseConfigurations::HashConfig.new("test", "primary", config))
  end
  ActiveRecord::Base.establish_connection(url(db, user))
  ActiveRecord::Schema.verbose = false
  eval(schema) # rubocop:disable Security/Eval
  nil
rescue StandardError => e
  e.message
ensure
  ActiveRecord::Base.establish_connection(URL)
end

begin
  ActiveRecord::Base.establish_connection(URL)
  class ApplicationRecord < ActiveRecord::Base
    self.abstract_class = true
  end
  ActiveRecord::Schema.verbose = false
  ActiveRecord::Schema.define do
    create_table :purchases, id: :bigint, default: -> { "idgen_snowflake()" } do |t|
      t.bigint :number, default: -> { "idgen_seq_next('purchase')" }
      t.text :item
    end
  end

  # Without the dumper filter first.
  plain = dump
  check("db/schema.rb without the filter has idgen's tables", plain.include?('create_table "idgen_public_key"'))
  err = load_schema(plain, "rails_plain")
  check("db:schema:load of it fails: cannot drop table idgen_... because extension idgen requires it",
        err.to_s =~ /cannot drop table idgen_\w+ because extension idgen requires it/, err)

  # db/structure.sql (pg_dump) names the extension and leaves its tables to it.
  structure = File.join(Dir.pwd, "structure.sql")
  ActiveRecord::Tasks::DatabaseTasks.structure_dump(ActiveRecord::Base.connection_db_config, structure)
  text = File.read(structure)
  check("db/structure.sql has CREATE EXTENSION idgen and no idgen_ table",
        text.include?("CREATE EXTENSION IF NOT EXISTS idgen") && !text.match?(/CREATE TABLE \S*idgen_/), text)
  sql(%(CREATE DATABASE "rails_structure"))
  err = begin
    ActiveRecord::Tasks::DatabaseTasks.structure_load(
      ActiveRecord::DatabaseConfigurations::UrlConfig.new("test", "primary", url("rails_structure"), {}), structure)
    nil
  rescue StandardError => e
    e.message
  end
  check("db:schema:load of db/structure.sql succeeds", err.nil?, err)
  check("the loaded purchases table takes its ids from idgen_snowflake()",
        sql("SELECT column_default FROM information_schema.columns WHERE table_name = 'purchases'" \
            " AND column_name = 'id'", "rails_structure") == [["idgen_snowflake()"]])

  require_relative "schema_dumper"
  require_relative "purchase"
  filtered = dump
  check("db/schema.rb with the filter: enable_extension \"idgen\", the purchases table, no idgen_ table",
        filtered.include?('enable_extension "idgen"') && filtered.include?('create_table "purchases"') &&
          !filtered.include?("idgen_public_key") && !filtered.include?("idgen_seq\""), filtered)
  err = load_schema(filtered, "rails_filtered")
  check("db:schema:load of it succeeds", err.nil?, err)
  check("the loaded purchases table takes its ids from idgen_snowflake()",
        sql("SELECT column_default FROM information_schema.columns WHERE table_name = 'purchases'" \
            " AND column_name = 'id'", "rails_filtered") == [["idgen_snowflake()"]])

  # A test database made by a role with CREATEDB only.
  sql("CREATE ROLE rails_app LOGIN CREATEDB")
  err = load_schema(filtered, "rails_test_plain", user: "rails_app")
  check("as a non-superuser, enable_extension \"idgen\" fails in a database from template1",
        err.to_s.include?("permission denied to create extension \"idgen\""), err)
  sql("CREATE DATABASE template_idgen")
  sql("CREATE EXTENSION idgen", "template_idgen")
  sql("ALTER DATABASE template_idgen IS_TEMPLATE true")
  err = load_schema(filtered, "rails_test", template: "template_idgen", user: "rails_app")
  check("from a template that has the extension, the schema loads as a non-superuser", err.nil?, err)

  # The model.
  purchase = Purchase.create!(item: "tea")
  check("create gives the record its id, an Integer", purchase.id.is_a?(Integer), purchase.id)
  text = sql("SELECT id::text FROM purchases WHERE id = #{purchase.id.to_i}")
  check("the id is the database's, exactly", text == [[purchase.id.to_s]], text)
  check("the id is above 2^53", purchase.id > 2**53, purchase.id)
  purchase.reload
  check("the business number came from its DEFAULT (after reload)", purchase.number.is_a?(Integer) && purchase.number >= 1,
        purchase.number)
  json = JSON.parse(purchase.to_json)
  check("to_json writes the id as a string", json["id"] == purchase.id.to_s, json)

  class PlainPurchase < ApplicationRecord
    self.table_name = "purchases"
    self.partial_writes = false # what Rails 7's partial_inserts = false does
  end
  plain_purchase = PlainPurchase.create!(item: "cake").reload
  check("without partial inserts the INSERT stores NULL in the business number", plain_purchase.number.nil?,
        plain_purchase.number)
  json = JSON.parse(plain_purchase.to_json)
  check("without as_json the id is a JSON number (JavaScript rounds it)", json["id"].is_a?(Integer), json)
rescue StandardError => e
  $failures += 1
  puts "not ok: Active Record: #{e.class}: #{e.message}\n#{e.backtrace.first(5).join("\n")}"
end
exit($failures.zero? ? 0 : 1)

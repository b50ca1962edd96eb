WITH sold AS (
  SELECT p.category, p.id AS product_id, p.name, SUM(i.quantity) AS quantity
  FROM products p
  JOIN order_items i ON i.product_id = p.id
  JOIN orders o ON o.id = i.order_id
  WHERE o.status = 'paid'
  GROUP BY p.id
), ranked AS (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY category ORDER BY quantity DESC, product_id) AS rn FROM sold
)
SELECT category, product_id, name, quantity FROM ranked WHERE rn = 1 ORDER BY category;
